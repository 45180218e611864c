import { z } from 'zod';
import { withoutNul } from '../../http/fields.ts';
import { CALLS_CAP, MAX_DESCRIPTION } from './service.ts';

export const SlugParams = z.object({ slug: z.string().max(64) });

const Price = z.number().int().describe('Price per call in micro-USD (1,000,000 = $1), above zero.');

export const PublishBody = z
  .object({
    slug: z.string().max(64).describe('3-64 lowercase letters, digits and dashes; reserved for good once published (retiring does not free it).'),
    kind: z.enum(['agent', 'endpoint']).describe('agent: one of your hosted agents runs per call; endpoint: your HTTPS endpoint receives the call.'),
    agent_id: z.string().max(64).optional().describe('kind agent: the hosted agent (the request body becomes its SVC_INPUT, its stdout the answer).'),
    endpoint_url: withoutNul(z.string().max(2048)).optional().describe('kind endpoint: an https URL on a public address (as for webhooks); the call is POSTed to it.'),
    price_micro_usd: Price,
    payee: z.string().max(42).describe('The EVM wallet paid for each call; must be a wallet linked to this account.'),
    description: withoutNul(z.string().max(MAX_DESCRIPTION)).optional(),
    listed: z.boolean().optional().describe('Shown in the public directory (default true).'),
    enabled: z.boolean().optional().describe('Taking calls (default true).'),
  })
  .strict();

export const PatchBody = z
  .object({
    price_micro_usd: Price.optional(),
    description: withoutNul(z.string().max(MAX_DESCRIPTION)).optional(),
    listed: z.boolean().optional(),
    enabled: z.boolean().optional(),
  })
  .strict();

const Revenue = z.object({ amount: z.string().describe('Token base units moved to the payee by settled payments.'), amount_micro_usd: z.number(), asset: z.string().nullable(), network: z.string().nullable() });

export const ServiceView = z.object({
  id: z.string(),
  slug: z.string(),
  kind: z.enum(['agent', 'endpoint']),
  agent_id: z.string().nullable(),
  endpoint_url: z.string().nullable(),
  price_micro_usd: z.number(),
  payee: z.string(),
  description: z.string(),
  listed: z.boolean(),
  enabled: z.boolean(),
  status: z.enum(['active', 'retired']),
  delivered_calls: z.number(),
  revenue: Revenue,
  created_at: z.string(),
  updated_at: z.string(),
  retired_at: z.string().nullable(),
});

const Settlement = z.object({
  scheme: z.string(),
  x402_versions: z.array(z.number()),
  network: z.string().nullable(),
  chain: z.string().nullable(),
  asset: z.string().nullable(),
  decimals: z.number().nullable(),
  facilitator: z.string().nullable(),
  custody: z.string(),
  confirmations: z.number().nullable(),
});

export const Directory = z.object({
  services: z.array(
    z.object({
      slug: z.string(),
      kind: z.string(),
      description: z.string(),
      price_micro_usd: z.number(),
      payee: z.string(),
      seller_handle: z.string().nullable(),
      delivered_calls: z.number(),
      terms_url: z.string(),
    }),
  ),
  ordering: z.string(),
  settlement: Settlement,
});

const RequirementV1 = z.object({
  scheme: z.literal('exact'),
  network: z.string().describe('The x402 version 1 network name (base, base-sepolia, ...), else eip155:<chain id>.'),
  maxAmountRequired: z.string().describe('Token base units, as a decimal string: exactly the price.'),
  resource: z.string(),
  description: z.string(),
  mimeType: z.string(),
  payTo: z.string().describe("The seller's payee."),
  asset: z.string().describe('The EIP-3009 token contract.'),
  maxTimeoutSeconds: z.number().int(),
  extra: z.object({ name: z.string(), version: z.string(), decimals: z.number().int() }).describe("The token's EIP-712 domain name and version, and its decimals."),
});

/** The 402 of an invoke: x402 version 1's PaymentRequired as its clients read it, the gateway's error object beside. */
export const PaymentRequiredV1 = z
  .object({
    x402Version: z.literal(1),
    error: z.string().describe('Why a payment is required, "<reason>: <words>" (x402 version 1 gives error as a string).'),
    accepts: z.array(RequirementV1).min(1),
    svc_error: z
      .object({
        type: z.literal('payment_required'),
        message: z.string(),
        reason: z.string().describe('payment_missing, malformed_payment, version_mismatch, wrong_network, underpaid, expired, payment_reused, invalid_signature, insufficient_funds, ... (docs/marketplace.md).'),
        x402_version: z.union([z.literal(1), z.literal(2)]).optional().describe('The x402 version of the payment presented, if one was.'),
        request_id: z.string(),
      })
      .describe("The gateway's error object, as `error` of its envelope on every other answer: branch on `type` and `reason`."),
  })
  .describe('x402 version 1 PaymentRequired; the PAYMENT-REQUIRED header carries the version 2 one.');

export const TermsView = z.object({
  slug: z.string(),
  kind: z.string(),
  description: z.string(),
  price_micro_usd: z.number(),
  payee: z.string(),
  seller_handle: z.string().nullable(),
  enabled: z.boolean(),
  delivered_calls: z.number(),
  invoke_url: z.string(),
  x402Version: z.literal(1),
  accepts: z.array(RequirementV1).describe('x402 version 1 payment requirements (exact scheme, EIP-3009 token, payTo the seller).'),
  x402_v2: z.record(z.string(), z.unknown()).nullable().describe('The same terms as x402 version 2 PaymentRequired (CAIP-2 network), as the PAYMENT-REQUIRED header of a 402 carries them.'),
  settlement: Settlement,
});

export const CallView = z.object({
  id: z.string(),
  request_id: z.string(),
  status: z.enum(['settling', 'delivered', 'failed']),
  payment: z.object({
    x402_version: z.number(),
    network: z.string(),
    payer: z.string(),
    payee: z.string(),
    asset: z.string(),
    amount: z.string(),
    amount_micro_usd: z.number(),
    nonce: z.string(),
    payment_id: z.string().nullable(),
    tx_hash: z.string().nullable(),
    block_number: z.number().nullable(),
  }),
  request_sha256: z.string(),
  payment_sha256: z.string(),
  response_status: z.number().nullable(),
  response_sha256: z.string().nullable(),
  error: z.object({ type: z.string(), message: z.string().nullable() }).nullable(),
  receipt: z.object({ payload: z.record(z.string(), z.unknown()), hash: z.string().nullable(), signature: z.string().nullable() }).nullable(),
  created_at: z.string(),
  settled_at: z.string().nullable(),
  ended_at: z.string().nullable(),
});

export const CallList = z.object({ calls: z.array(CallView).describe(`The last ${CALLS_CAP} calls, newest first; no content.`), service_id: z.string(), slug: z.string() });
