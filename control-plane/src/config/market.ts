import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { ChainConfig } from './chains.ts';
import { ConfigError, intWithDefault, jsonEnv } from './parse.ts';

/**
 * The marketplace, Agent Post and relays.
 *
 * Services are paid inline with x402 `exact` payments: an EIP-3009 `transferWithAuthorization` from buyer to
 * seller that the gateway submits on chain as facilitator (it pays the gas, never holds the tokens).
 * SVC_MARKET_X402 names the chain of SVC_CHAINS (default the first), the EIP-3009 token (default that chain's
 * usdt) with its decimals (default the chain's) and its EIP-712 domain `name` and `version`, e.g.
 * `{"chain":"base","name":"USD Coin","version":"2"}`. SVC_MARKET_FACILITATOR_KEY_FILE holds the 0x-hex
 * private key of the account that submits the authorizations. Without both, services can be published but
 * their terms carry no payment option and invoke answers 501 not_enabled.
 */
const X402 = z
  .object({
    chain: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be the name of a chain of SVC_CHAINS').optional(),
    asset: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address').optional(),
    decimals: z.number().int().min(0).max(36).optional(),
    name: z.string().min(1).max(100),
    version: z.string().min(1).max(32),
  })
  .strict();
type X402Entry = z.infer<typeof X402>;

export const marketEnv = {
  SVC_MARKET_X402: jsonEnv(X402, undefined as X402Entry | undefined, 'a JSON object', (v) => v),
  SVC_MARKET_FACILITATOR_KEY_FILE: z.string().min(1).optional(),
  /** The highest price a service may ask, micro-USD (default $1,000). */
  SVC_MARKET_MAX_PRICE_MICRO_USD: intWithDefault(1_000_000_000, 1, Number.MAX_SAFE_INTEGER),
  /** How long a payment authorization may stay valid (the terms' maxTimeoutSeconds). */
  SVC_MARKET_PAYMENT_WINDOW_SECONDS: intWithDefault(300, 30, 86_400),
  /** How long the gateway waits for a seller's HTTPS endpoint to answer an invoke. */
  SVC_MARKET_ENDPOINT_TIMEOUT_MS: intWithDefault(30_000, 100, 600_000),
  /** How long the gateway waits for a submitted payment's confirmations before answering 504 (the call can be resumed). */
  SVC_MARKET_SETTLE_TIMEOUT_MS: intWithDefault(120_000, 500, 600_000),
  /** Unread messages an inbox holds; the next message is refused with 429 until some are read or deleted. */
  SVC_POST_INBOX_MAX: intWithDefault(1000, 1, 1_000_000),
  /** The Retry-After of a full inbox, seconds. */
  SVC_POST_RETRY_AFTER_SECONDS: intWithDefault(300, 1, 86_400),
  /** Wrong PINs that lock a relay for good. */
  SVC_RELAY_PIN_ATTEMPTS: intWithDefault(5, 1, 100),
};

export interface MarketX402Config {
  chain: ChainConfig;
  /** The EIP-3009 token, lowercase 0x-hex. */
  asset: `0x${string}`;
  decimals: number;
  /** The token's EIP-712 domain. */
  name: string;
  version: string;
}

export interface MarketConfig {
  /** Null: no payment option is offered (invoke answers 501). */
  x402: MarketX402Config | null;
  facilitatorKey: `0x${string}` | null;
  maxPriceMicroUsd: number;
  paymentWindowSeconds: number;
  endpointTimeoutMs: number;
  settleTimeoutMs: number;
  postInboxMax: number;
  postRetryAfterSeconds: number;
  relayPinAttempts: number;
}

type Env = {
  SVC_MARKET_X402: X402Entry | undefined;
  SVC_MARKET_FACILITATOR_KEY_FILE?: string | undefined;
  SVC_MARKET_MAX_PRICE_MICRO_USD: number;
  SVC_MARKET_PAYMENT_WINDOW_SECONDS: number;
  SVC_MARKET_ENDPOINT_TIMEOUT_MS: number;
  SVC_MARKET_SETTLE_TIMEOUT_MS: number;
  SVC_POST_INBOX_MAX: number;
  SVC_POST_RETRY_AFTER_SECONDS: number;
  SVC_RELAY_PIN_ATTEMPTS: number;
};

export function marketConfig(e: Env, chains: ChainConfig[]): MarketConfig {
  let x402: MarketX402Config | null = null;
  let facilitatorKey: `0x${string}` | null = null;
  const x = e.SVC_MARKET_X402;
  if (x) {
    const chain = x.chain ? chains.find((c) => c.name === x.chain) : chains[0];
    if (!chain) throw new ConfigError([`SVC_MARKET_X402: chain "${x.chain ?? '(first)'}" names no chain of SVC_CHAINS (${chains.map((c) => c.name).join(', ') || 'none'})`]);
    x402 = { chain, asset: (x.asset ?? chain.usdt).toLowerCase() as `0x${string}`, decimals: x.decimals ?? chain.decimals, name: x.name, version: x.version };
    const file = e.SVC_MARKET_FACILITATOR_KEY_FILE;
    if (!file) throw new ConfigError(['SVC_MARKET_FACILITATOR_KEY_FILE: required with SVC_MARKET_X402 (the account that submits payment authorizations and pays their gas)']);
    let raw: string;
    try {
      raw = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ConfigError([`SVC_MARKET_FACILITATOR_KEY_FILE: cannot read ${file} (${(err as Error).message})`]);
    }
    if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) throw new ConfigError([`SVC_MARKET_FACILITATOR_KEY_FILE: ${file} must hold one 0x-prefixed 32-byte hex private key`]);
    facilitatorKey = raw.toLowerCase() as `0x${string}`;
  }
  return {
    x402,
    facilitatorKey,
    maxPriceMicroUsd: e.SVC_MARKET_MAX_PRICE_MICRO_USD,
    paymentWindowSeconds: e.SVC_MARKET_PAYMENT_WINDOW_SECONDS,
    endpointTimeoutMs: e.SVC_MARKET_ENDPOINT_TIMEOUT_MS,
    settleTimeoutMs: e.SVC_MARKET_SETTLE_TIMEOUT_MS,
    postInboxMax: e.SVC_POST_INBOX_MAX,
    postRetryAfterSeconds: e.SVC_POST_RETRY_AFTER_SECONDS,
    relayPinAttempts: e.SVC_RELAY_PIN_ATTEMPTS,
  };
}
