import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import { identityDocument } from './registry.ts';
import { Directory, HandleParams, IdentityDocument, MintBody, MintedPassport, PassportProof, PassportView } from './schemas.ts';
import type { PassportsService } from './service.ts';

/** What the registry document asks of KYA: the id of the credential active at a handle, if any. */
export interface ActiveKya {
  activeId(handle: string): Promise<string | null>;
}

/** Passports (spec: proofs): mint, the public directory, lookup, the offline proof, and the ERC-8004-shaped registry document. */
export function passportsRoutes(app: FastifyInstance, passports: PassportsService, kya: ActiveKya): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];

  r.post(
    '/v1/passport',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary:
          'Claim a handle (once per account, reserved for good) and mint a signed passport from the provable history: verified runs and receipts counted from stored receipts that verify; a second POST at the same handle re-mints over fresh history',
        body: MintBody,
        response: { 201: MintedPassport },
      },
    },
    async (req, reply) => reply.code(201).send(await passports.mint(requireSession(req).accountId, req.body.handle)),
  );

  r.get(
    '/v1/passport',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'Public agent directory ranked by verified runs, then receipts (at most 500)', response: { 200: Directory } },
    },
    async () => passports.directory(),
  );

  r.get(
    '/v1/passport/:handle',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'The current passport at a handle: signed credential and anchor; unknown handles are 404', params: HandleParams, response: { 200: PassportView } },
    },
    async (req) => passports.get(req.params.handle),
  );

  r.get(
    '/v1/passport/:handle/proof',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Signed credential, commitment inputs and commitment, batch root, ordered sibling hashes (audit path), leaf index, tree size and public anchors: all an offline check needs',
        params: HandleParams,
        response: { 200: PassportProof },
      },
    },
    async (req) => passports.proof(req.params.handle),
  );

  r.get(
    '/v1/registry/identity/:handle',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Off-chain ERC-8004-shaped identity document of a handle; its erc8004 block states that no registry contract is deployed',
        params: HandleParams,
        response: { 200: IdentityDocument },
      },
    },
    async (req) => {
      const row = await passports.current(req.params.handle);
      const [anchor, active] = await Promise.all([passports.anchor(row), kya.activeId(row.handle)]);
      return identityDocument(row, passports.links(row.handle), anchor, active ? { id: active } : null);
    },
  );
}
