import type { Kysely } from 'kysely';
import { ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { MarketConfig } from '../../config/market.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { DB } from '../../db/schema.ts';
import { agentOf } from '../agents/store.ts';
import type { IdentityService } from '../identity/service.ts';
import type { PassportsService } from '../passports/service.ts';
import { checkWebhookUrl, type SelfAddress } from '../webhooks/url.ts';
import type { Facilitator } from './facilitator.ts';
import { CALLS_CAP, DIRECTORY_CAP, DIRECTORY_ORDER, insertService, recentCalls, serviceBySlug, updateService, withStats, type CallRow, type ServiceRow, type ServiceStats } from './store.ts';
import type { Terms } from './terms.ts';

export interface ServicesDeps {
  db: Kysely<DB>;
  clock: Clock;
  identity: Pick<IdentityService, 'accountOfWallet' | 'lockAccount'>;
  passports: Pick<PassportsService, 'store'>;
  config: MarketConfig;
  self: SelfAddress;
  /** Null where SVC_MARKET_X402 is unset: terms carry no payment option and invoke answers 501. */
  terms: Terms | null;
  facilitator: Facilitator | null;
}

export const SLUG = /^[a-z0-9](?:[a-z0-9-]{1,62}[a-z0-9])$/;
/** Literal segments of /v1/services/*: never a slug. */
const RESERVED_SLUGS = new Set(['directory', 'manage']);
export const MAX_DESCRIPTION = 1000;

export interface PublishInput {
  slug: string;
  kind: 'agent' | 'endpoint';
  agent_id?: string | undefined;
  endpoint_url?: string | undefined;
  price_micro_usd: number;
  payee: string;
  description?: string | undefined;
  listed?: boolean | undefined;
  enabled?: boolean | undefined;
}

export interface PatchInput {
  price_micro_usd?: number | undefined;
  description?: string | undefined;
  listed?: boolean | undefined;
  enabled?: boolean | undefined;
}

/**
 * Publishing services: a hosted agent of the account or its HTTPS endpoint at a slug (reserved for good),
 * for a price paid to an EVM wallet linked to the account. The owner lists, updates and retires them and
 * reads their last calls (payment metadata, fingerprints, receipts; never content). Anyone reads the
 * directory and a service's terms.
 */
export class ServicesService {
  constructor(readonly d: ServicesDeps) {}

  private checkPrice(price: number): void {
    if (!Number.isSafeInteger(price) || price <= 0) throw invalid('price_micro_usd: a whole number of micro-USD above zero', 'price_micro_usd');
    if (price > this.d.config.maxPriceMicroUsd) throw invalid(`price_micro_usd: at most ${this.d.config.maxPriceMicroUsd} on this gateway`, 'price_micro_usd');
  }

  private checkDescription(d: string): void {
    if (d.length > MAX_DESCRIPTION) throw invalid(`description: at most ${MAX_DESCRIPTION} characters`, 'description');
  }

  async publish(accountId: string, input: PublishInput) {
    const slug = input.slug;
    if (!SLUG.test(slug)) throw invalid('slug: 3-64 lowercase letters, digits and dashes, starting and ending with a letter or digit', 'slug');
    if (RESERVED_SLUGS.has(slug)) throw invalid(`slug: "${slug}" is reserved`, 'slug');
    this.checkPrice(input.price_micro_usd);
    const description = input.description ?? '';
    this.checkDescription(description);
    if (!/^0x[0-9a-fA-F]{40}$/.test(input.payee)) throw invalid('payee: a 0x-prefixed 20-byte EVM address', 'payee');
    const payee = input.payee.toLowerCase();
    if ((await this.d.identity.accountOfWallet(this.d.db, payee)) !== accountId) {
      throw invalid('payee: not a wallet linked to this account; link it first (POST /v1/auth/wallets)', 'payee');
    }
    let agentId: string | null = null;
    let endpoint: string | null = null;
    if (input.kind === 'agent') {
      if (input.endpoint_url !== undefined) throw invalid('endpoint_url: only for kind endpoint', 'endpoint_url');
      if (!input.agent_id) throw invalid('agent_id: required for kind agent', 'agent_id');
      try {
        agentId = (await agentOf(this.d.db, accountId, input.agent_id)).id;
      } catch {
        throw invalid('agent_id: no hosted agent of this account has this id', 'agent_id');
      }
    } else {
      if (input.agent_id !== undefined) throw invalid('agent_id: only for kind agent', 'agent_id');
      if (!input.endpoint_url) throw invalid('endpoint_url: required for kind endpoint', 'endpoint_url');
      endpoint = this.checkEndpoint(input.endpoint_url);
    }
    const existing = await serviceBySlug(this.d.db, slug);
    if (existing) throw slugTaken(existing);
    const now = this.d.clock.now();
    try {
      await insertService(this.d.db, {
        id: newId('svc_'),
        account_id: accountId,
        slug,
        kind: input.kind,
        agent_id: agentId,
        endpoint_url: endpoint,
        price_micro_usd: input.price_micro_usd,
        payee,
        description,
        listed: input.listed ?? true,
        enabled: input.enabled ?? true,
        status: 'active',
        created_at: now,
        updated_at: now,
        retired_at: null,
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw slugTaken((await serviceBySlug(this.d.db, slug)) ?? null);
      throw e;
    }
    return this.ownerView((await withStats(this.d.db, 'id', (await serviceBySlug(this.d.db, slug))!.id))[0]!);
  }

  /** An HTTPS endpoint on a public address, as for webhooks (plain http only where private addresses are allowed, for development). */
  private checkEndpoint(raw: string): string {
    let url: string;
    try {
      url = checkWebhookUrl(raw, this.d.self);
    } catch (e) {
      if (e instanceof ServiceError) throw invalid(e.message.replace(/^url:/, 'endpoint_url:'), 'endpoint_url');
      throw e;
    }
    if (new URL(url).protocol !== 'https:' && !this.d.self.allowPrivate) throw invalid('endpoint_url: must be an https URL', 'endpoint_url');
    if (url.length > 2048) throw invalid('endpoint_url: at most 2048 characters', 'endpoint_url');
    return url;
  }

  async list(accountId: string) {
    return { services: (await withStats(this.d.db, 'account', accountId)).map((s) => this.ownerView(s)) };
  }

  private async owned(accountId: string, slug: string): Promise<ServiceRow> {
    const s = await serviceBySlug(this.d.db, slug);
    if (!s || s.account_id !== accountId) throw notFound('Service');
    return s;
  }

  async update(accountId: string, slug: string, input: PatchInput) {
    const s = await this.owned(accountId, slug);
    if (s.status === 'retired') throw new ServiceError('conflict', `Service ${slug} is retired; a retired service is not changed`, { reason: 'retired' });
    if (input.price_micro_usd !== undefined) this.checkPrice(input.price_micro_usd);
    if (input.description !== undefined) this.checkDescription(input.description);
    const set: Partial<ServiceRow> = { updated_at: this.d.clock.now() };
    if (input.price_micro_usd !== undefined) set.price_micro_usd = input.price_micro_usd;
    if (input.description !== undefined) set.description = input.description;
    if (input.listed !== undefined) set.listed = input.listed;
    if (input.enabled !== undefined) set.enabled = input.enabled;
    await updateService(this.d.db, s.id, set);
    return this.ownerView((await withStats(this.d.db, 'id', s.id))[0]!);
  }

  /** Retires a service: off the directory and not invocable; the slug stays reserved and the calls stay listed. Idempotent. */
  async retire(accountId: string, slug: string) {
    const s = await this.owned(accountId, slug);
    if (s.status !== 'retired') {
      const now = this.d.clock.now();
      await updateService(this.d.db, s.id, { status: 'retired', retired_at: now, enabled: false, listed: false, updated_at: now });
    }
    return this.ownerView((await withStats(this.d.db, 'id', s.id))[0]!);
  }

  async calls(accountId: string, slug: string) {
    const s = await this.owned(accountId, slug);
    return { calls: (await recentCalls(this.d.db, s.id)).map(callView), service_id: s.id, slug: s.slug };
  }

  async directory() {
    const rows = await withStats(this.d.db, 'directory', DIRECTORY_CAP);
    const handles = await this.handles(rows.map((r) => r.account_id));
    return {
      services: rows.map((s) => ({
        slug: s.slug,
        kind: s.kind,
        description: s.description,
        price_micro_usd: s.price_micro_usd,
        payee: s.payee,
        seller_handle: handles.get(s.account_id) ?? null,
        delivered_calls: s.delivered_calls,
        terms_url: `/v1/services/${s.slug}`,
      })),
      ordering: DIRECTORY_ORDER,
      settlement: this.settlement(),
    };
  }

  /** How calls are paid: x402 `exact`, the buyer's authorization submitted by the gateway, tokens straight to the seller. */
  settlement() {
    const x = this.d.config.x402;
    return {
      scheme: 'exact',
      x402_versions: [1, 2],
      network: x ? `eip155:${x.chain.chainId}` : null,
      chain: x?.chain.name ?? null,
      asset: x?.asset ?? null,
      decimals: x?.decimals ?? null,
      facilitator: this.d.facilitator?.address.toLowerCase() ?? null,
      custody: 'none: the buyer signs an EIP-3009 transferWithAuthorization to the seller\'s payee; the gateway submits it and never holds the tokens',
      confirmations: x?.chain.confirmations ?? null,
    };
  }

  private async handles(accountIds: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const id of new Set(accountIds)) {
      const h = await this.d.passports.store.handleOf(id);
      if (h) out.set(id, h.handle);
    }
    return out;
  }

  /** A service's public terms: price, payee and the x402 `accepts` array (version 1; version 2 beside it). Retired or unknown: 404. */
  async terms(slug: string) {
    const s = (await serviceBySlug(this.d.db, slug)) ?? null;
    if (!s || s.status === 'retired') throw notFound('Service');
    const [st] = await withStats(this.d.db, 'id', s.id);
    const handle = (await this.d.passports.store.handleOf(s.account_id))?.handle ?? null;
    const t = this.d.terms;
    return {
      slug: s.slug,
      kind: s.kind,
      description: s.description,
      price_micro_usd: s.price_micro_usd,
      payee: s.payee,
      seller_handle: handle,
      enabled: s.enabled,
      delivered_calls: st?.delivered_calls ?? 0,
      invoke_url: `/v1/services/${s.slug}/invoke`,
      x402Version: 1 as const,
      accepts: t ? [t.v1(s)] : [],
      x402_v2: t ? t.paymentRequiredV2(s) : null,
      settlement: this.settlement(),
    };
  }

  ownerView(s: ServiceStats) {
    return {
      id: s.id,
      slug: s.slug,
      kind: s.kind,
      agent_id: s.agent_id,
      endpoint_url: s.endpoint_url,
      price_micro_usd: s.price_micro_usd,
      payee: s.payee,
      description: s.description,
      listed: s.listed,
      enabled: s.enabled,
      status: s.status,
      delivered_calls: s.delivered_calls,
      revenue: { amount: s.revenue, amount_micro_usd: s.revenue_micro_usd, asset: this.d.config.x402?.asset ?? null, network: this.d.config.x402 ? `eip155:${this.d.config.x402.chain.chainId}` : null },
      created_at: s.created_at.toISOString(),
      updated_at: s.updated_at.toISOString(),
      retired_at: s.retired_at?.toISOString() ?? null,
    };
  }
}

function slugTaken(existing: ServiceRow | null): ServiceError {
  if (existing?.status === 'retired') return new ServiceError('conflict', `The slug "${existing.slug}" belonged to a retired service; a slug is never reassigned`, { param: 'slug', reason: 'slug_retired' });
  return new ServiceError('conflict', `The slug "${existing?.slug ?? ''}" is taken`, { param: 'slug', reason: 'slug_taken' });
}

/** One call as its seller sees it: payment metadata, fingerprints and the receipt; never the content. */
export function callView(c: CallRow) {
  return {
    id: c.id,
    request_id: c.request_id,
    status: c.status,
    payment: {
      x402_version: c.x402_version,
      network: c.network,
      payer: c.payer,
      payee: c.payee,
      asset: c.asset,
      amount: c.amount,
      amount_micro_usd: c.amount_micro_usd,
      nonce: c.nonce,
      payment_id: c.payment_id,
      tx_hash: c.tx_hash,
      block_number: c.block_number,
    },
    request_sha256: c.request_sha256,
    payment_sha256: c.payment_sha256,
    response_status: c.response_status,
    response_sha256: c.response_sha256,
    error: c.error_type ? { type: c.error_type, message: c.error_message } : null,
    receipt: c.receipt_payload ? { payload: JSON.parse(c.receipt_payload) as Record<string, unknown>, hash: c.receipt_hash, signature: c.receipt_signature } : null,
    created_at: c.created_at.toISOString(),
    settled_at: c.settled_at?.toISOString() ?? null,
    ended_at: c.ended_at?.toISOString() ?? null,
  };
}

export { CALLS_CAP };
