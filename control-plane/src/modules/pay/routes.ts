import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Clock } from '@svc/shared';
import type { Config } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import { requireKey } from '../../http/auth.ts';
import { ChainRegistry } from '../billing/chains.ts';
import { ADDRESS, TX_HASH } from '../billing/units.ts';
import { TransferVerifier } from '../billing/verifier.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { DEFAULT_EXPIRY_SECONDS, PayService } from './service.ts';

const Signed = z.object({
  document: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON of document: the signed message.'),
  signature: z.string().describe('EIP-191 personal_sign signature of canonical.'),
  signer: z.string().describe('The gateway signer (GET /v1/receipts/pubkey).'),
  scheme: z.string(),
});

const PaymentRequest = z.object({
  id: z.string(),
  object: z.literal('payment_request'),
  status: z.enum(['open', 'settled', 'expired']),
  chain: z.string(),
  chain_id: z.number(),
  token: z.string().describe('The USDT contract the payer must transfer.'),
  decimals: z.number(),
  payee: z.string(),
  amount: z.string().describe('Token base units to transfer at least (amount_micro_usd scaled by decimals, rounded up), as a decimal string.'),
  amount_micro_usd: z.number(),
  memo: z.string().nullable(),
  created_at: z.string(),
  expires_at: z.string(),
  invoice: Signed.describe('The signed invoice.'),
  settlement: z
    .object({
      tx_hash: z.string(),
      log_index: z.number(),
      payer: z.string(),
      amount: z.string(),
      block_number: z.number(),
      confirmations: z.number(),
      settled_at: z.string(),
      receipt: Signed.describe('The signed settlement receipt.'),
    })
    .nullable(),
  pending: z
    .object({ tx_hash: z.string(), log_index: z.number(), confirmations: z.number(), required_confirmations: z.number() })
    .nullable()
    .describe('On a 202 from settle: the transfer qualifies but has too few confirmations; settle again later.'),
});

export interface PayDeps {
  config: Config;
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
}

/** Payment requests: signed non-custodial invoices on EVM chains (spec: /v1/pay). */
export function payRoutes(app: FastifyInstance, deps: PayDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['pay'];
  const chains = new ChainRegistry(deps.config.chains);
  const pay = new PayService(deps.db, deps.clock, deps.signer, chains, new TransferVerifier(chains));
  const Id = z.object({ id: z.string().max(64) });

  r.post(
    '/v1/pay/requests',
    {
      config: { auth: 'key', scope: 'billing' },
      schema: {
        tags,
        summary: 'Mint a signed payment-request invoice (non-custodial; EVM chains): the payer sends the USDT amount straight to the payee',
        body: z
          .object({
            chain: z.string().min(1).max(64).describe('A configured chain name (GET /v1/billing/methods) or eip155:<chain_id>.'),
            payee: z.string().regex(ADDRESS, 'must be a 0x-prefixed 20-byte address'),
            amount_micro_usd: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).describe('Amount in micro-USD (1 USDT = 1,000,000); the invoice states the token amount.'),
            memo: z.string().max(500).optional(),
            expires_in_seconds: z.number().int().min(60).max(30 * 24 * 3600).optional().describe(`Default ${DEFAULT_EXPIRY_SECONDS}.`),
          })
          .strict(),
        response: { 201: PaymentRequest },
      },
    },
    async (req, reply) => reply.code(201).send(await pay.create(requireKey(req), req.body)),
  );

  r.get(
    '/v1/pay/requests/:id',
    { config: { auth: 'key', scope: 'billing' }, schema: { tags, summary: 'A payment request and its status', params: Id, response: { 200: PaymentRequest } } },
    async (req) => pay.get(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/pay/requests/:id/settle',
    {
      config: { auth: 'key', scope: 'billing' },
      schema: {
        tags,
        summary: 'Verify the on-chain transfer {tx_hash} to the payee; returns the signed settlement receipt (202 while confirmations are too few)',
        params: Id,
        body: z.object({ tx_hash: z.string().regex(TX_HASH, 'must be a transaction hash: 0x and 64 hex digits') }).strict(),
        response: { 200: PaymentRequest, 202: PaymentRequest },
      },
    },
    async (req, reply) => {
      const { outcome, request } = await pay.settle(requireKey(req).accountId, req.params.id, req.body.tx_hash);
      return reply.code(outcome === 'pending' ? 202 : 200).send(request);
    },
  );
}
