import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { Vault } from './deps.ts';
import { session, tags } from './routes-assets.ts';
import { IdParams } from './schemas-assets.ts';
import { AttestationList, AttestationView, AttesterBody, AttesterList, AttesterParams, AttesterView, FigureBody, ProofBody, ProofView, StatementBody } from './schemas-attest.ts';

/** Attesters, attestations, NAV and reserves figures, selective-disclosure proofs. */
export function vaultAttestRoutes(app: FastifyInstance, v: Vault): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/v1/vault/assets/:id/attesters',
    { config: session, schema: { tags, summary: 'Issuer names an attester (auditor, custodian, appraiser, legal) by account_id or wallet; `attester_named` chained', params: IdParams, body: AttesterBody, response: { 201: AttesterView } } },
    async (req, reply) => reply.code(201).send(await v.attesters.name(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.get(
    '/v1/vault/assets/:id/attesters',
    { config: session, schema: { tags, summary: 'Roster: the issuer sees every role (active and revoked), an attester their own active roles; holders 403, anyone else 404', params: IdParams, response: { 200: AttesterList } } },
    async (req) => v.attesters.list(requireSession(req).accountId, req.params.id),
  );

  r.delete(
    '/v1/vault/assets/:id/attesters/:attester_id',
    { config: session, schema: { tags, summary: 'Issuer revokes a role (`attester_revoked` chained; again changes nothing); attestations already recorded stand', params: AttesterParams, response: { 200: AttesterView } } },
    async (req) => v.attesters.revoke(requireSession(req).accountId, req.params.id, req.params.attester_id),
  );

  r.post(
    '/v1/vault/assets/:id/attestations',
    {
      config: session,
      schema: { tags, summary: "An attester records a sealed statement in an active role: gateway-signed, optionally signed by the attester's wallet (EIP-191, verified on submit); `attestation_recorded` chained", params: IdParams, body: StatementBody, response: { 201: AttestationView } },
    },
    async (req, reply) => reply.code(201).send(await v.attestations.statement(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.get(
    '/v1/vault/assets/:id/attestations',
    { config: session, schema: { tags, summary: 'Every attestation and figure of the asset, opened; the issuer, holders and active attesters read them (anyone else 404)', params: IdParams, response: { 200: AttestationList } } },
    async (req) => v.attestations.list(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/vault/assets/:id/nav',
    {
      config: session,
      schema: { tags, summary: "The issuer or an attester records a NAV or reserves figure: a gateway-signed proof (verifiable through POST /v1/receipts/verify), optionally co-signed by the recorder's wallet; `nav_recorded` chained", params: IdParams, body: FigureBody, response: { 201: AttestationView } },
    },
    async (req, reply) => reply.code(201).send(await v.attestations.figure(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.post(
    '/v1/vault/proofs',
    {
      config: session,
      schema: { tags, summary: 'A signed selective-disclosure statement: the caller (by one of their wallets) holds at least N of the asset now; reveals nothing else; verifiable through POST /v1/receipts/verify. Below N 409, nothing signed', body: ProofBody, response: { 201: ProofView } },
    },
    async (req, reply) => {
      const s = requireSession(req);
      return reply.code(201).send(await v.proofs.holdsAtLeast(s.accountId, s.walletAddress, req.body));
    },
  );
}
