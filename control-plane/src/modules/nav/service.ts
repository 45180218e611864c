import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, sha256Hex0x, type Clock, type SignedReceipt } from '@svc/shared';
import type { AssetsConfig } from '../../config/assets.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Anchors } from '../anchors/service.ts';
import { checkSourceUrl } from '../attestations/https-source.ts';
import type { ChainRegistry } from '../billing/chains.ts';
import type { Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { METHODOLOGY, computeNav, type Book } from './compute.ts';
import { observe } from './observe.ts';
import type { CalculateBody } from './schemas.ts';
import { assetOwner, claimAndLock, insertNav, latest, markPublished, published, publishedCount, type NavRow } from './store.ts';
import { NavViews } from './views.ts';
import { instantOf } from '../../http/fields.ts';

export interface NavDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  metering: Metering;
  anchors: Anchors;
  chains: ChainRegistry;
  sealKey: Uint8Array;
  config: AssetsConfig;
  self: SelfAddress;
  publicUrl: URL;
}

/** Public reads: an unknown asset, one never calculated and one never published are the same 404. */
const publicNotFound = () => notFound('NAV record');
const ownedNotFound = () => notFound('NAV asset');
const taken = (assetId: string) => new ServiceError('conflict', `asset_id: ${assetId} is held by another account`, { param: 'asset_id', reason: 'asset_taken' });

/**
 * Private NAV: a book submitted once, sealed with every version computed from it and never published; each
 * calculation or refresh observes the book's inputs now, computes with exact decimals, and stores the next
 * signed version (metered). Publishing makes a version readable by anyone (free, idempotent): the figures,
 * the signed document and the evidence references, never the book.
 */
export class NavService {
  private readonly sealer: Sealer;
  readonly views: NavViews;

  constructor(private readonly d: NavDeps) {
    this.sealer = new Sealer(d.sealKey);
    this.views = new NavViews(d.anchors, d.clock);
  }

  explorerSource() {
    return { counts: async () => ({ published_nav_records: await publishedCount(this.d.db) }) };
  }

  /** The book of a request; every refusal is a 400 (or 409 for a held asset id) before anything is read or written. */
  private async bookOf(p: KeyPrincipal, body: CalculateBody): Promise<Book> {
    const owner = await assetOwner(this.d.db, body.asset_id);
    if (owner !== null && owner !== p.accountId) throw taken(body.asset_id);
    const now = this.d.clock.now();
    const chain = body.supply ? this.d.chains.require(body.supply.chain, 'supply.chain') : null;
    return {
      currency: body.currency,
      holdings: body.holdings.map((h, i) => {
        const asOf = h.price_as_of === undefined ? now : instantOf(h.price_as_of, `holdings[${i}].price_as_of`, { offset: 'required' });
        if (asOf.getTime() > now.getTime()) throw invalid(`holdings[${i}].price_as_of: is in the future`, `holdings[${i}].price_as_of`);
        return {
          label: h.label,
          quantity: h.quantity,
          price: h.price ?? null,
          price_as_of: h.price !== undefined ? asOf.toISOString() : null,
          price_source: h.price_source ? { url: checkSourceUrl(h.price_source.url, this.d.self, `holdings[${i}].price_source.url`), json_pointer: h.price_source.json_pointer, label: h.price_source.label } : null,
        };
      }),
      cash: body.cash.map((c) => ({ label: c.label, amount: c.amount })),
      liabilities: body.liabilities.map((l) => ({ label: l.label, amount: l.amount })),
      shares_outstanding: body.shares_outstanding ?? null,
      supply: body.supply && chain ? { chain: chain.name, chain_id: chain.chainId, address: body.supply.address.toLowerCase(), block_number: body.supply.block_number ?? null } : null,
      freshness_seconds: body.freshness_seconds ?? this.d.config.navFreshnessSeconds,
      salt: randomBytes(32).toString('hex'),
    };
  }

  async calculate(p: KeyPrincipal, body: CalculateBody, ctx: { requestId: string; runId: string | null }) {
    return this.run(p, body.asset_id, await this.bookOf(p, body), ctx, 'POST /v1/nav/calculate');
  }

  /** Recomputes the latest version's book against the current clock, optionally with a newly observed supply. */
  async refresh(p: KeyPrincipal, assetId: string, supply: CalculateBody['supply'], ctx: { requestId: string; runId: string | null }) {
    const prev = await latest(this.d.db, assetId);
    if (!prev || prev.account_id !== p.accountId) throw ownedNotFound();
    const book = JSON.parse(this.sealer.open(prev.book_sealed, `${prev.id}:book`).toString('utf8')) as Book;
    book.salt = randomBytes(32).toString('hex');
    if (supply) {
      const chain = this.d.chains.require(supply.chain, 'supply.chain');
      book.supply = { chain: chain.name, chain_id: chain.chainId, address: supply.address.toLowerCase(), block_number: supply.block_number ?? null };
      book.shares_outstanding = null;
    } else if (book.supply) {
      book.supply = { ...book.supply, block_number: null }; // observed again at the head
    }
    return this.run(p, assetId, book, ctx, 'POST /v1/nav/:asset_id/refresh');
  }

  private async run(p: KeyPrincipal, assetId: string, book: Book, ctx: { requestId: string; runId: string | null }, route: string): Promise<{ view: Awaited<ReturnType<NavViews['owner']>>; receipt: SignedReceipt }> {
    const price = this.d.config.navPriceMicroUsd;
    const navId = newId('nav_');
    const resource = new URL(route.replace(/^\S+ /, '').replace(':asset_id', encodeURIComponent(assetId)), this.d.publicUrl).toString();
    const settled = await this.d.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: price, route, resource }, async () => {
      const obs = await observe(book, { clock: this.d.clock, chains: this.d.chains, config: this.d.config, self: this.d.self });
      const row = await this.store(p, assetId, navId, book, obs, ctx.requestId);
      return { result: row, usage: { costMicroUsd: price, kind: 'nav', units: { calculations: 1 }, detail: { asset_id: assetId, nav_id: navId, version: row.version, status: row.status_at_calculation } } };
    });
    return { view: await this.views.owner(settled.result), receipt: settled.receipt };
  }

  private store(p: KeyPrincipal, assetId: string, navId: string, book: Book, obs: Awaited<ReturnType<typeof observe>>, receiptId: string): Promise<NavRow> {
    const now = this.d.clock.now();
    const result = computeNav(book, obs, now);
    const freshUntil = new Date(now.getTime() + book.freshness_seconds * 1000);
    return this.d.db.transaction().execute(async (trx) => {
      const holder = await claimAndLock(trx, assetId, p.accountId, now);
      if (holder !== p.accountId) throw taken(assetId);
      const prev = await latest(trx, assetId);
      const doc = {
        type: 'svc.nav' as const,
        format: 1 as const,
        nav_id: navId,
        asset_id: assetId,
        version: (prev?.version ?? 0) + 1,
        supersedes: prev?.id ?? null,
        previous_sha256: prev?.document_sha256 ?? null,
        currency: book.currency,
        status: result.status,
        missing: result.missing,
        stale_inputs: result.stale,
        figures: result.figures,
        evidence: obs.evidence,
        methodology: METHODOLOGY,
        computed_at: now.toISOString(),
        freshness_seconds: book.freshness_seconds,
        fresh_until: freshUntil.toISOString(),
        signer: this.d.signer.address,
      };
      const signed = this.d.signer.signDocument(doc);
      return insertNav(trx, {
        id: navId,
        asset_id: assetId,
        account_id: p.accountId,
        key_id: p.keyId,
        version: doc.version,
        status_at_calculation: result.status,
        document: signed.canonical,
        document_sha256: sha256Hex0x(signed.canonical),
        signature: signed.signature,
        book_sealed: this.sealer.seal(JSON.stringify(book), `${navId}:book`),
        receipt_id: receiptId,
        computed_at: now,
        fresh_until: freshUntil,
      });
    });
  }

  /** Makes a version of the account's asset public (the latest by default); free; publishing again is harmless. */
  async publish(accountId: string, assetId: string, navId: string | undefined) {
    const last = await latest(this.d.db, assetId);
    if (!last || last.account_id !== accountId) throw ownedNotFound();
    const row = await markPublished(this.d.db, assetId, navId ?? last.id, this.d.clock.now());
    if (!row) throw notFound('NAV record');
    return this.views.owner(row);
  }

  async publicRecord(assetId: string, navId: string | undefined) {
    const [row] = await published(this.d.db, assetId, 1, navId);
    if (!row) throw publicNotFound();
    return this.views.public(row);
  }

  async publicHistory(assetId: string, limit: number) {
    const rows = await published(this.d.db, assetId, limit);
    if (rows.length === 0) throw publicNotFound();
    return this.views.history(assetId, rows);
  }

  async publicEvidence(assetId: string, navId: string | undefined) {
    const [row] = await published(this.d.db, assetId, 1, navId);
    if (!row) throw publicNotFound();
    return this.views.evidence(row);
  }
}
