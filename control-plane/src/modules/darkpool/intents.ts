import type { Kysely } from 'kysely';
import { ServiceError, Sealer, checksumAddress, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DarkpoolConfig } from '../../config/darkpool.ts';
import { ASSET_ID } from '../../config/darkpool.ts';
import type { DB } from '../../db/schema.ts';
import type { IdentityService } from '../identity/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { appendHistory, history, insertIntent, intentsInMarket, ownedIntent, restingCount, type IntentRow } from './store.ts';
import { BlindBook, CROSSING_RULE, NOTIONAL_MAX, PRICE_MAX, SIZE_MAX, checkTerms, openJson, sealJson, type Terms } from './terms.ts';

export interface DarkpoolDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  signer: ReceiptSigner;
  identity: IdentityService;
  config: DarkpoolConfig;
}

export const intentNotFound = () => notFound('Intent');
export const termsAad = (id: string) => `${id}:terms`;

/** What the market status route says is never disclosed, and why. */
export const DISCLOSURE = 'No depth, no counts, no prices: the pool shows nobody the book. You see only your own intents; a match shows its counterparty only as a settlement address, and only after both sides confirm.';

/**
 * Dark pool intents: submit (terms sealed, findable only through blind keys), read your own with its terms
 * opened and its append-only history (another account's is not found), withdraw (idempotent; 409 once matched),
 * and the market status: eligibility rules and your own participation.
 */
export class IntentsService {
  readonly sealer: Sealer;
  readonly book: BlindBook;

  constructor(readonly d: DarkpoolDeps) {
    this.sealer = new Sealer(d.sealKey);
    this.book = new BlindBook(d.sealKey);
  }

  open(row: Pick<IntentRow, 'id' | 'terms_sealed'>): Terms {
    return openJson<Terms>(this.sealer, row.terms_sealed, termsAad(row.id));
  }

  async view(row: IntentRow) {
    const t = this.open(row);
    const h = await history(this.d.db, row.id);
    return {
      id: row.id,
      object: 'intent' as const,
      state: row.state,
      terms: { ...t, settlement_address: checksumAddress(t.settlement_address) },
      match_id: row.match_id,
      created_at: row.created_at.toISOString(),
      matched_at: row.matched_at?.toISOString() ?? null,
      withdrawn_at: row.withdrawn_at?.toISOString() ?? null,
      history: h.map((e) => ({ seq: e.seq, type: e.type, at: e.at.toISOString(), data: JSON.parse(e.data) as Record<string, unknown> })),
    };
  }

  async create(accountId: string, input: Terms) {
    const terms: Terms = { ...input, settlement_address: input.settlement_address.toLowerCase() };
    checkTerms(terms, this.d.config.assets);
    const id = newId('int_');
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await this.d.identity.lockAccount(trx, accountId);
      const n = await restingCount(trx, accountId);
      if (n >= this.d.config.maxResting) {
        throw new ServiceError('conflict', `An account keeps at most ${this.d.config.maxResting} resting intents and this one has ${n}`, { reason: 'intent_limit', limit: this.d.config.maxResting });
      }
      const r = await insertIntent(trx, {
        id,
        account_id: accountId,
        book_key: this.book.book(terms.asset_id, terms.side),
        asset_key: this.book.asset(terms.asset_id),
        state: 'resting',
        terms_sealed: sealJson(this.sealer, terms, termsAad(id)),
        match_id: null,
        history_count: 0,
        created_at: now,
        matched_at: null,
        withdrawn_at: null,
      });
      await appendHistory(trx, r, 'created', now, {});
      return r;
    });
    return this.view(row);
  }

  async get(accountId: string, id: string) {
    const row = await ownedIntent(this.d.db, accountId, id);
    if (!row) throw intentNotFound();
    return this.view(row);
  }

  /** Withdraws a resting intent of the account; a withdrawn one answers as it is; a matched one is 409. */
  async cancel(accountId: string, id: string) {
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      const r = await ownedIntent(trx, accountId, id, true);
      if (!r) throw intentNotFound();
      if (r.state === 'matched') throw new ServiceError('conflict', `This intent is matched (match ${r.match_id}): it can no longer be withdrawn`, { reason: 'matched', match_id: r.match_id });
      if (r.state === 'withdrawn') return r;
      await trx.updateTable('darkpool_intents').set({ state: 'withdrawn', withdrawn_at: now }).where('id', '=', id).execute();
      await appendHistory(trx, r, 'withdrawn', now, {});
      return { ...r, state: 'withdrawn' as const, withdrawn_at: now };
    });
    return this.view(row);
  }

  /** Eligibility rules of one market and the account's own intents in it; never depth, counts or prices. */
  async market(accountId: string, assetId: string) {
    if (!ASSET_ID.test(assetId)) throw invalid('params.asset_id: not an asset id (letters, digits, . _ : -; at most 64)', 'asset_id');
    const listed = this.d.config.assets;
    const eligible = !listed || listed.includes(assetId);
    const chain = this.d.config.chain!;
    const mine = await intentsInMarket(this.d.db, accountId, this.book.asset(assetId), this.d.config.maxResting);
    return {
      asset_id: assetId,
      object: 'market_status' as const,
      eligible,
      reason: eligible ? null : 'This asset is not on the operator\'s list of eligible assets.',
      rules: {
        assets: listed ? 'listed by the operator' : 'any well-formed asset id',
        sides: ['buy', 'sell'],
        size: { min: 1, max: SIZE_MAX, unit: 'whole units of the asset' },
        limit_price_micro_usd: { min: 1, max: PRICE_MAX },
        max_notional_micro_usd: NOTIONAL_MAX,
        max_resting_intents: this.d.config.maxResting,
        crossing_rule: CROSSING_RULE,
        self_match: 'never: intents of one account never match each other',
        cash_leg: { chain: chain.name, chain_id: chain.chainId, token: chain.usdt, decimals: chain.decimals, confirmations: chain.confirmations, paid_by: 'buyer', paid_to: "the seller's settlement address" },
        asset_leg: 'UNAVAILABLE: the gateway does not verify delivery of the asset; the parties settle it between themselves.',
      },
      your_participation: {
        intents: mine.map((r) => ({ id: r.id, side: this.open(r).side, state: r.state, match_id: r.match_id, created_at: r.created_at.toISOString() })),
      },
      disclosure: DISCLOSURE,
    };
  }
}
