import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { AddressParams, ClaimBody, ClaimView, NonceBody, NonceView } from './schemas.ts';
import type { SupportService } from './service.ts';

/** Holder support claims (spec: assets): three public routes; 501 where no Solana RPC is configured. */
export function supportRoutes(app: FastifyInstance, support: SupportService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['support'];
  const config = { auth: 'public' as const };
  const preValidation = async () => void support.assertConfigured();

  r.post(
    '/v1/support/nonce',
    { config, preValidation, schema: { tags, summary: 'Mint a single-use nonce and the exact message both wallets (Solana and EVM) sign', body: NonceBody, response: { 201: NonceView } } },
    async (req, reply) => reply.code(201).send(await support.nonce(req.body.solana_address, req.body.evm_address)),
  );

  r.post(
    '/v1/support/claims',
    {
      config,
      preValidation,
      schema: {
        tags,
        summary: 'Register a holder claim: an ed25519 signature by the Solana key and an EIP-191 signature by the EVM key over the nonce\'s message, and a finalized Solana transaction that raised the address\'s token balance. Registration only; never an approval or a promise of payment',
        body: ClaimBody,
        response: { 201: ClaimView },
      },
    },
    async (req, reply) => reply.code(201).send(await support.register(req.body)),
  );

  r.get(
    '/v1/support/claims/:address',
    { config, preValidation, schema: { tags, summary: 'A registered claim by Solana address', params: AddressParams, response: { 200: ClaimView } } },
    async (req) => support.get(req.params.address),
  );
}
