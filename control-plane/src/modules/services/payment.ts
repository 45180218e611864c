import { z } from 'zod';
import { canonicalize, sha256Hex } from '@svc/shared';
import { PAYMENT_IDENTIFIER } from './terms.ts';

/**
 * Reading an x402 payment header: `X-PAYMENT` carries an x402 version 1 payload, `PAYMENT-SIGNATURE` a
 * version 2 payload (CAIP-2 network, the accepted requirements echoed), both base64 JSON. Only the `exact`
 * scheme with an EIP-3009 authorization is taken. Every refusal names its reason; none of them has touched
 * the chain or written anything.
 */
export class PaymentRefused extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** A mined settlement of an authorization. */
export interface Settlement {
  txHash: `0x${string}`;
  blockNumber: number;
}

/** The settlement could not be confirmed: the transaction may still be mined (the call stays claimed). */
export class SettlementUnconfirmed extends Error {
  constructor(
    readonly txHash: `0x${string}`,
    message: string,
  ) {
    super(message);
  }
}

const hex = (bytes: number) => z.string().regex(new RegExp(`^0x[0-9a-fA-F]{${bytes * 2}}$`));
const uint = z.string().regex(/^\d{1,78}$/);
const Authorization = z.object({ from: hex(20), to: hex(20), value: uint, validAfter: uint, validBefore: uint, nonce: hex(32) });
const Exact = z.object({ signature: z.string().regex(/^0x[0-9a-fA-F]+$/).max(4096), authorization: Authorization });
const Extensions = z.record(z.string(), z.unknown()).optional();
const V1 = z.object({ x402Version: z.literal(1), scheme: z.string(), network: z.string(), payload: Exact, extensions: Extensions });
const V2 = z.object({
  x402Version: z.literal(2),
  accepted: z.object({ scheme: z.string(), network: z.string(), asset: z.string(), payTo: z.string(), amount: z.string() }).passthrough(),
  payload: Exact,
  extensions: Extensions,
});

export interface Payment {
  version: 1 | 2;
  scheme: string;
  network: string;
  /** The token the buyer accepted (version 2 names it; version 1 pays the token of the terms). */
  asset: string | null;
  authorization: z.infer<typeof Authorization>;
  signature: `0x${string}`;
  /** The buyer's idempotency key (x402 payment-identifier extension), or null. */
  paymentId: string | null;
  /** sha256 of the payload's canonical JSON. */
  sha256: string;
}

const PAYMENT_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** The payment of a request, from the header its version uses (version 2 first when both are sent), or null without one. */
export function readPayment(headers: Record<string, string | string[] | undefined>): Payment | null {
  const v2 = one(headers['payment-signature']);
  const v1 = one(headers['x-payment']);
  if (v2 === undefined && v1 === undefined) return null;
  const version = v2 !== undefined ? 2 : 1;
  const raw = (v2 ?? v1)!.trim();
  const name = version === 2 ? 'PAYMENT-SIGNATURE' : 'X-PAYMENT';
  let json: unknown;
  try {
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw) || raw.length > 16_384) throw new Error('not base64');
    json = JSON.parse(Buffer.from(raw, 'base64').toString('utf8'));
  } catch {
    throw new PaymentRefused('malformed_payment', `${name} is not base64-encoded JSON of an x402 payment payload`);
  }
  const shape = version === 2 ? V2 : V1;
  const parsed = shape.safeParse(json);
  if (!parsed.success) {
    const claimed = (json as { x402Version?: unknown } | null)?.x402Version;
    if (claimed !== undefined && claimed !== version) {
      throw new PaymentRefused('version_mismatch', `${name} carries x402 version ${version}; this payload says x402Version ${String(claimed)} (send version 1 in X-PAYMENT, version 2 in PAYMENT-SIGNATURE)`);
    }
    const issue = parsed.error.issues[0];
    throw new PaymentRefused('malformed_payment', `${name}: not an x402 version ${version} exact payment (${issue ? `${issue.path.join('.') || 'payload'}: ${issue.message}` : 'unreadable'})`);
  }
  const p = parsed.data;
  const idExt = (p.extensions?.[PAYMENT_IDENTIFIER] as { info?: { id?: unknown } } | undefined)?.info?.id;
  let paymentId: string | null = null;
  if (idExt !== undefined) {
    if (typeof idExt !== 'string' || !PAYMENT_ID.test(idExt)) {
      throw new PaymentRefused('malformed_payment', `${name}: the payment-identifier id must be 16-128 letters, digits, _ or -`);
    }
    paymentId = idExt;
  }
  return {
    version,
    scheme: 'scheme' in p ? p.scheme : p.accepted.scheme,
    network: 'network' in p ? p.network : p.accepted.network,
    asset: 'accepted' in p ? p.accepted.asset.toLowerCase() : null,
    authorization: p.payload.authorization,
    signature: p.payload.signature as `0x${string}`,
    paymentId,
    sha256: sha256Hex(canonicalize(json)),
  };
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

export interface Expected {
  /** The network named in the terms of the payment's version. */
  network: string;
  asset: string;
  payee: string;
  amount: bigint;
  nowSeconds: number;
}

/** Seconds a payment must still be valid for when it arrives (the submission has to be mined before it lapses). */
export const MIN_VALIDITY_SECONDS = 6;

/** Checks the payment against the service's terms before anything touches the chain: scheme, network, token, payee, amount, validity window. */
export function checkAgainstTerms(p: Payment, e: Expected): void {
  const a = p.authorization;
  if (p.scheme !== 'exact') throw new PaymentRefused('unsupported_scheme', `scheme "${p.scheme}" is not offered; pay with the exact scheme`);
  if (p.network !== e.network) throw new PaymentRefused('wrong_network', `the payment is for network ${p.network}; this service is paid on ${e.network}`);
  if (p.asset !== null && p.asset !== e.asset.toLowerCase()) throw new PaymentRefused('wrong_asset', `the payment is in token ${p.asset}; this service is paid in ${e.asset}`);
  if (a.to.toLowerCase() !== e.payee.toLowerCase()) throw new PaymentRefused('wrong_payee', `the authorization pays ${a.to}; this service's payee is ${e.payee}`);
  const value = BigInt(a.value);
  if (value < e.amount) throw new PaymentRefused('underpaid', `the authorization moves ${value} base units; the price is ${e.amount}`);
  if (value > e.amount) throw new PaymentRefused('amount_mismatch', `the authorization moves ${value} base units; the exact scheme pays the price, ${e.amount}, exactly`);
  if (BigInt(a.validBefore) < BigInt(e.nowSeconds + MIN_VALIDITY_SECONDS)) {
    throw new PaymentRefused('expired', `the authorization lapsed (valid before ${a.validBefore}, now ${e.nowSeconds}); sign a new one`);
  }
  if (BigInt(a.validAfter) > BigInt(e.nowSeconds)) throw new PaymentRefused('not_yet_valid', `the authorization is valid only after ${a.validAfter} (now ${e.nowSeconds})`);
}

/** The library's refusal reasons, in the words of this API. */
export function reasonOf(libraryReason: string | undefined, message?: string): string {
  const r = libraryReason ?? '';
  const m = message ?? '';
  if (/used or canceled|AuthorizationUsed/i.test(m)) return 'payment_reused';
  if (/invalid signature/i.test(m)) return 'invalid_signature';
  if (/authorization is expired/i.test(m)) return 'expired';
  if (/exceeds balance|insufficient balance|: balance/i.test(m)) return 'insufficient_funds';
  if (/signature/.test(r)) return 'invalid_signature';
  if (/nonce_already_used|already_used/.test(r)) return 'payment_reused';
  if (/insufficient_balance|insufficient_funds/.test(r)) return 'insufficient_funds';
  if (/valid_before|expired/.test(r)) return 'expired';
  if (/valid_after/.test(r)) return 'not_yet_valid';
  if (/recipient/.test(r)) return 'wrong_payee';
  if (/value|amount/.test(r)) return 'amount_mismatch';
  if (/network/.test(r)) return 'wrong_network';
  if (/token_name|token_version|domain/.test(r)) return 'invalid_signature';
  return 'payment_invalid';
}
