import type { Selectable } from 'kysely';
import { ServiceError, invalid, newId, sha256Hex } from '@svc/shared';
import type { VaultDocumentsTable } from '../../db/schema.ts';
import type { VaultCore } from './core.ts';

/** The largest document the vault stores, in bytes (decoded). */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** The route's body limit: the base64 of the largest document and the other fields. */
export const DOCUMENT_BODY_LIMIT = Math.ceil((MAX_DOCUMENT_BYTES * 4) / 3) + 64 * 1024;

type DocRow = Selectable<VaultDocumentsTable>;

export interface DocumentInput {
  name: string;
  content_type: string;
  content_b64: string;
  shared_with_holders: boolean;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const docNotFound = () => new ServiceError('not_found', 'Document not found');

export function documentMeta(core: VaultCore, r: DocRow) {
  return {
    id: r.id,
    object: 'vault_document' as const,
    asset_id: r.asset_id,
    name: core.seal.openText(r.name_sealed, `document:${r.id}:name`),
    content_type: r.content_type,
    size_bytes: r.size_bytes,
    sha256: r.sha256,
    shared_with_holders: r.shared_with_holders,
    state: r.deleted_at ? ('deleted' as const) : ('stored' as const),
    chain_seq: r.chain_seq,
    created_at: r.created_at.toISOString(),
    deleted_at: r.deleted_at ? r.deleted_at.toISOString() : null,
  };
}

/** A stored document's bytes as base64; a deleted one is gone (410). */
export function documentContent(core: VaultCore, r: DocRow) {
  if (!r.content_sealed) throw new ServiceError('gone', 'This document was deleted: its content is destroyed (its sha256 stays in the chain)');
  return { ...documentMeta(core, r), content_b64: core.seal.openBytes(r.content_sealed, `document:${r.id}:content`).toString('base64') };
}

/**
 * Documents: the issuer stores sealed documents (the sha256 of the bytes chained as `document_added`),
 * lists them all; holders list and fetch those shared with holders. Deleting destroys the ciphertext and
 * chains `document_deleted`; the metadata and the sha256 stay.
 */
export class DocumentsService {
  constructor(private readonly core: VaultCore) {}

  async add(accountId: string, assetId: string, input: DocumentInput) {
    if (!BASE64.test(input.content_b64)) throw invalid('content_b64: not base64 (RFC 4648, padded)', 'content_b64');
    const bytes = Buffer.from(input.content_b64, 'base64');
    if (bytes.length === 0) throw invalid('content_b64: the document is empty', 'content_b64');
    if (bytes.length > MAX_DOCUMENT_BYTES) {
      throw new ServiceError('payload_too_large', `content_b64: the document is ${bytes.length} bytes; the most a vault document holds is ${MAX_DOCUMENT_BYTES}`, { param: 'content_b64', limit_bytes: MAX_DOCUMENT_BYTES });
    }
    const core = this.core;
    return core.change(assetId, accountId, 'issuer', async (c) => {
      const id = newId('vdoc_');
      const sha256 = `0x${sha256Hex(bytes)}`;
      const ev = await c.append('document_added', { document_id: id, name: input.name, content_type: input.content_type, size_bytes: bytes.length, sha256, shared_with_holders: input.shared_with_holders });
      const row = await c.trx
        .insertInto('vault_documents')
        .values({
          id,
          asset_id: c.asset.id,
          name_sealed: core.seal.text(input.name, `document:${id}:name`),
          content_type: input.content_type,
          size_bytes: bytes.length,
          sha256,
          shared_with_holders: input.shared_with_holders,
          content_sealed: core.seal.bytes(bytes, `document:${id}:content`),
          chain_seq: ev.seq,
          created_at: c.now,
          deleted_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return documentMeta(core, row);
    });
  }

  /** The issuer: every document, deleted ones included; a holder: those shared with holders and not deleted. */
  async list(accountId: string, assetId: string) {
    const { asset, issuer } = await this.reader(accountId, assetId);
    let q = this.core.db.selectFrom('vault_documents').selectAll().where('asset_id', '=', asset.id);
    if (!issuer) q = q.where('shared_with_holders', '=', true).where('deleted_at', 'is', null);
    const rows = await q.orderBy('seq', 'desc').execute();
    return { documents: rows.map((r) => documentMeta(this.core, r)), asset_id: asset.id };
  }

  async get(accountId: string, assetId: string, docId: string) {
    const { asset, issuer } = await this.reader(accountId, assetId);
    const row = await this.core.db.selectFrom('vault_documents').selectAll().where('id', '=', docId).where('asset_id', '=', asset.id).executeTakeFirst();
    if (!row || (!issuer && !row.shared_with_holders)) throw docNotFound();
    return documentContent(this.core, row);
  }

  /** Destroys the ciphertext (`document_deleted` chained); deleting again changes nothing. */
  async remove(accountId: string, assetId: string, docId: string) {
    return this.core.change(assetId, accountId, 'issuer', async (c) => {
      const row = await c.trx.selectFrom('vault_documents').selectAll().where('id', '=', docId).where('asset_id', '=', c.asset.id).executeTakeFirst();
      if (!row) throw docNotFound();
      if (row.deleted_at) return documentMeta(this.core, row);
      await c.append('document_deleted', { document_id: row.id, sha256: row.sha256 });
      const done = await c.trx.updateTable('vault_documents').set({ content_sealed: null, deleted_at: c.now }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow();
      return documentMeta(this.core, done);
    });
  }

  /** The issuer or a holder; an attester who holds nothing is refused (403). */
  private async reader(accountId: string, assetId: string) {
    const { asset, roles } = await this.core.access(this.core.db, assetId, accountId, 'party');
    const issuer = roles.includes('issuer');
    if (!issuer && !roles.includes('holder')) throw new ServiceError('forbidden', "Documents are the issuer's and, for those shared with holders, the holders'", { reason: 'issuer_or_holder_only' });
    return { asset, issuer };
  }
}
