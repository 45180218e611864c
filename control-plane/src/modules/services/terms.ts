import type { MarketX402Config } from '../../config/market.ts';
import { microToBase } from '../billing/units.ts';

/** What a service's terms are made of: the service's price and payee, where it is invoked. */
export interface TermsInput {
  slug: string;
  description: string;
  price_micro_usd: number;
  payee: string;
}

/** x402 version 1 payment requirements (the `accepts` entries of a 402 body and of GET /v1/services/:slug). */
export type RequirementsV1 = {
  scheme: 'exact';
  network: string;
  maxAmountRequired: string;
  resource: string;
  description: string;
  mimeType: string;
  payTo: string;
  asset: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string; decimals: number };
};

/** x402 version 2 payment requirements (CAIP-2 network). */
export type RequirementsV2 = {
  scheme: 'exact';
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string; decimals: number };
};

/** x402 version 1's PaymentRequired: `error` a string (the reason in words), `accepts` at least one requirement. */
export type PaymentRequiredV1 = {
  x402Version: 1;
  error: string;
  accepts: RequirementsV1[];
};

export type PaymentRequiredV2 = {
  x402Version: 2;
  error?: string;
  resource: { url: string; description: string; mimeType: string };
  accepts: RequirementsV2[];
  extensions: Record<string, unknown>;
};

/** The x402 payment-identifier extension (an idempotency key the buyer may attach to a payment). */
export const PAYMENT_IDENTIFIER = 'payment-identifier';
const PAYMENT_IDENTIFIER_DECLARATION = {
  info: { required: false },
  schema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { required: { type: 'boolean' }, id: { type: 'string', minLength: 16, maxLength: 128 } },
    required: ['required'],
  },
};

export const v2Network = (chainId: number) => `eip155:${chainId}`;

/** The terms of one service in both x402 versions: pay exactly the price to the seller's payee in the configured EIP-3009 token. */
export class Terms {
  /** `v1Name`: the chain's x402 version 1 network name (x402.ts's v1Network). */
  constructor(
    private readonly x: MarketX402Config,
    private readonly publicUrl: URL,
    private readonly windowSeconds: number,
    private readonly v1Name: string,
  ) {}

  /** The network of a payment in x402 `version`: the version 1 name, or the CAIP-2 id. */
  network(version: 1 | 2): string {
    return version === 1 ? this.v1Name : v2Network(this.x.chain.chainId);
  }

  get chainId(): number {
    return this.x.chain.chainId;
  }

  resource(slug: string): string {
    return new URL(`/v1/services/${slug}/invoke`, this.publicUrl).toString();
  }

  amount(priceMicroUsd: number): bigint {
    return microToBase(priceMicroUsd, this.x.decimals);
  }

  private extra() {
    return { name: this.x.name, version: this.x.version, decimals: this.x.decimals };
  }

  v1(s: TermsInput): RequirementsV1 {
    return {
      scheme: 'exact',
      network: this.v1Name,
      maxAmountRequired: this.amount(s.price_micro_usd).toString(),
      resource: this.resource(s.slug),
      description: s.description,
      mimeType: 'application/json',
      payTo: s.payee,
      asset: this.x.asset,
      maxTimeoutSeconds: this.windowSeconds,
      extra: this.extra(),
    };
  }

  v2(s: TermsInput): RequirementsV2 {
    return {
      scheme: 'exact',
      network: v2Network(this.x.chain.chainId),
      amount: this.amount(s.price_micro_usd).toString(),
      asset: this.x.asset,
      payTo: s.payee,
      maxTimeoutSeconds: this.windowSeconds,
      extra: this.extra(),
    };
  }

  paymentRequiredV1(s: TermsInput, error: string): PaymentRequiredV1 {
    return { x402Version: 1, error, accepts: [this.v1(s)] };
  }

  paymentRequiredV2(s: TermsInput, error?: string): PaymentRequiredV2 {
    return {
      x402Version: 2,
      ...(error ? { error } : {}),
      resource: { url: this.resource(s.slug), description: s.description, mimeType: 'application/json' },
      accepts: [this.v2(s)],
      extensions: { [PAYMENT_IDENTIFIER]: PAYMENT_IDENTIFIER_DECLARATION },
    };
  }
}

/** Base64 of the JSON, as x402 carries headers (PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE). */
export const headerValue = (v: unknown) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64');
