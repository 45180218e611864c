import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { Vault } from './deps.ts';
import { DOCUMENT_BODY_LIMIT, MAX_DOCUMENT_BYTES } from './documents.ts';
import { open, session, tags } from './routes-assets.ts';
import { IdParams } from './schemas-assets.ts';
import { DocParams, DocumentBody, DocumentContent, DocumentList, DocumentMeta, GrantBody, GrantList, GrantView, NewGrant, VaultView, ViewDocParams, ViewTokenParams } from './schemas-documents.ts';

/** Sealed documents and scoped view keys. */
export function vaultDocumentRoutes(app: FastifyInstance, v: Vault): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/v1/vault/assets/:id/documents',
    {
      config: session,
      bodyLimit: DOCUMENT_BODY_LIMIT,
      schema: { tags, summary: `Issuer stores a sealed document (at most ${MAX_DOCUMENT_BYTES} bytes; 413 above); its sha256 chained as \`document_added\``, params: IdParams, body: DocumentBody, response: { 201: DocumentMeta } },
    },
    async (req, reply) => reply.code(201).send(await v.documents.add(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.get(
    '/v1/vault/assets/:id/documents',
    { config: session, schema: { tags, summary: 'Document metadata: the issuer every document (deleted ones too), holders those shared with holders; attesters 403, anyone else 404', params: IdParams, response: { 200: DocumentList } } },
    async (req) => v.documents.list(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/vault/assets/:id/documents/:doc_id',
    { config: session, schema: { tags, summary: 'A document\'s bytes as base64, to whoever may list it; deleted 410', params: DocParams, response: { 200: DocumentContent } } },
    async (req) => v.documents.get(requireSession(req).accountId, req.params.id, req.params.doc_id),
  );

  r.delete(
    '/v1/vault/assets/:id/documents/:doc_id',
    { config: session, schema: { tags, summary: 'Issuer deletes a document: the ciphertext destroyed, its sha256 stays chained (`document_deleted`); again changes nothing', params: DocParams, response: { 200: DocumentMeta } } },
    async (req) => v.documents.remove(requireSession(req).accountId, req.params.id, req.params.doc_id),
  );

  r.post(
    '/v1/vault/assets/:id/view-grant',
    { config: session, schema: { tags, summary: 'Issuer mints a scoped view key (summary, holders, documents) with an expiry; the token shown once; `view_grant_minted` chained', params: IdParams, body: GrantBody, response: { 201: NewGrant } } },
    async (req, reply) => reply.code(201).send(await v.grants.mint(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.get(
    '/v1/vault/assets/:id/view-grants',
    { config: session, schema: { tags, summary: "The asset's view grants (issuer only), newest first", params: IdParams, response: { 200: GrantList } } },
    async (req) => v.grants.list(requireSession(req).accountId, req.params.id),
  );

  r.delete(
    '/v1/vault/view-grants/:id',
    { config: session, schema: { tags, summary: 'Issuer revokes a view grant at once (`view_grant_revoked` chained); again changes nothing', params: IdParams, response: { 200: GrantView } } },
    async (req) => v.grants.revoke(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/vault/view/:token',
    { config: open, schema: { tags, summary: 'A vault asset through a view key: exactly its scopes. Unknown, revoked and expired keys answer the same 404', params: ViewTokenParams, response: { 200: VaultView } } },
    async (req) => v.grants.read(req.params.token),
  );

  r.get(
    '/v1/vault/view/:token/documents/:doc_id',
    { config: open, schema: { tags, summary: 'One stored document (base64) through a view key with the documents scope (another scope 403; unknown, revoked and expired keys 404)', params: ViewDocParams, response: { 200: DocumentContent } } },
    async (req) => v.grants.document(req.params.token, req.params.doc_id),
  );
}
