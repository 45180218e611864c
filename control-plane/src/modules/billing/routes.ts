import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Clock } from '@svc/shared';
import type { Config } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import { requireSession } from '../../http/auth.ts';
import type { Metering } from '../money/metering.ts';
import { ChainRegistry } from './chains.ts';
import { DepositService } from './deposits.ts';
import { TX_HASH } from './units.ts';
import { TransferVerifier } from './verifier.ts';

const Deposit = z.object({
  id: z.string(),
  object: z.literal('deposit'),
  status: z.enum(['pending', 'credited', 'rejected']).describe('pending: too few confirmations, nothing credited yet; credited: added to the ledger once; rejected: a pending transfer that later failed a check (see reason).'),
  chain: z.string(),
  chain_id: z.number(),
  tx_hash: z.string(),
  log_index: z.number().describe('The Transfer log credited; every (chain, tx_hash, log_index) credits once.'),
  from: z.string(),
  to: z.string(),
  token: z.string().describe('The USDT contract that emitted the Transfer log.'),
  amount: z.string().describe('Token base units, as a decimal string.'),
  decimals: z.number(),
  amount_micro_usd: z.number().describe('Credit: base units scaled to micro-USD (dust below one micro-USD is not credited).'),
  block_number: z.number(),
  confirmations: z.number(),
  required_confirmations: z.number(),
  reason: z.string().nullable(),
  ledger_ref: z.string().describe('The ledger entry ref (kind deposit): chain:tx_hash:log_index.'),
  created_at: z.string(),
  credited_at: z.string().nullable(),
});

const Methods = z.object({
  treasury: z.string().nullable().describe('Send USDT here (SVC_TREASURY_ADDRESS); null when deposits are not configured.'),
  deposit_senders: z.enum(['linked', 'any']).describe('linked: only transfers sent from a wallet linked to the account are credited.'),
  submit: z.string(),
  chains: z.array(
    z.object({
      name: z.string(),
      network: z.string().describe('CAIP-2 id, also accepted as chain.'),
      chain_id: z.number(),
      usdt: z.string().describe('The USDT contract; transfers of any other token are refused.'),
      decimals: z.number(),
      confirmations: z.number().describe('Blocks (inclusive) before a deposit is credited.'),
      min_deposit_micro_usd: z.number(),
    }),
  ),
  solana: z.object({ treasury: z.string(), usdt_mint: z.string(), decimals: z.number() }).optional().describe('Present only when Solana is configured (not in this build).'),
});

export interface BillingDeps {
  config: Config;
  db: Kysely<DB>;
  clock: Clock;
  metering: Metering;
  /** The identity module's wallet list, for the sender check. */
  identity: { listWallets(accountId: string): Promise<Array<{ address: string }>> };
}

/** Deposits of on-chain USDT and how to pay (spec: billing). */
export function billingRoutes(app: FastifyInstance, deps: BillingDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['billing'];
  const chains = new ChainRegistry(deps.config.chains);
  const deposits = new DepositService(deps.db, deps.clock, deps.metering, chains, new TransferVerifier(chains), {
    treasury: deps.config.billing.treasury,
    senders: deps.config.depositSenders,
    linkedWallets: async (id) => (await deps.identity.listWallets(id)).map((w) => w.address),
  });

  r.get(
    '/v1/billing/methods',
    { config: { auth: 'public' }, schema: { tags, summary: 'How to pay: treasury address, chains, USDT contracts, confirmations (plus a Solana block when configured)', response: { 200: Methods } } },
    async () => ({
      treasury: deps.config.billing.treasury?.toLowerCase() ?? null,
      deposit_senders: deps.config.depositSenders,
      submit: 'POST /v1/billing/deposits with {chain, tx_hash} (session)',
      chains: deps.config.chains.map((c) => ({
        name: c.name,
        network: `eip155:${c.chainId}`,
        chain_id: c.chainId,
        usdt: c.usdt,
        decimals: c.decimals,
        confirmations: c.confirmations,
        min_deposit_micro_usd: c.minDepositMicroUsd,
      })),
    }),
  );

  r.post(
    '/v1/billing/deposits',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Verify an on-chain USDT transfer to the treasury and credit it; idempotent (201 credited now, 200 already known, 202 pending confirmations)',
        body: z
          .object({
            chain: z.string().min(1).max(64).describe('A configured chain name (see /v1/billing/methods) or eip155:<chain_id>.'),
            tx_hash: z.string().regex(TX_HASH, 'must be a transaction hash: 0x and 64 hex digits'),
            log_index: z.number().int().min(0).max(1_000_000).optional().describe('Pin one Transfer log; default: the first qualifying one.'),
          })
          .strict(),
        response: { 200: Deposit, 201: Deposit, 202: Deposit },
      },
    },
    async (req, reply) => {
      const { deposit, outcome } = await deposits.submit(requireSession(req).accountId, req.body);
      return reply.code(outcome === 'pending' ? 202 : outcome === 'credited' ? 201 : 200).send(deposit);
    },
  );

  r.get(
    '/v1/billing/deposits',
    { config: { auth: 'session' }, schema: { tags, summary: 'Deposit history, newest first (bare array, at most 100)', response: { 200: z.array(Deposit) } } },
    async (req) => deposits.list(requireSession(req).accountId),
  );

  r.post(
    '/v1/billing/deposits/refresh',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Re-check every pending deposit, crediting those now confirmed; returns the deposit history', response: { 200: z.array(Deposit) } },
    },
    async (req) => deposits.refresh(requireSession(req).accountId),
  );
}
