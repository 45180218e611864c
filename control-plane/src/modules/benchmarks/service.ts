import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, type Clock, type SignedReceipt } from '@svc/shared';
import type { AssetsConfig } from '../../config/assets.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { saltedSha256 } from '../nav/compute.ts';
import { normalize } from '../nav/decimal.ts';
import { COHORTS, GUARANTEES_NOT_IMPLEMENTED, METHODOLOGY_VERSION, antiLeakage, band, cohortById, type Cohort } from './cohorts.ts';
import { openHoldings, storeResult, type SealedHoldings } from './results.ts';
import type { SubmitBody } from './schemas.ts';
import { destroyDue, insertBenchmark, latestResult, lockBenchmark, lockCohort, ownedBenchmark, participantCounts, results, type BenchmarkRow, type ResultRow } from './store.ts';
import { benchmarkView, resultView, HISTORY_NOTE } from './views.ts';
import { instantOf } from '../../http/fields.ts';

export interface BenchmarksDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  metering: Metering;
  sealKey: Uint8Array;
  config: AssetsConfig;
  publicUrl: URL;
}

const DEFAULT_RETENTION_MS = 30 * 86_400_000;
const MAX_RETENTION_MS = 2 * 366 * 86_400_000;
type Ctx = { requestId: string; runId: string | null };

/** Another tenant's id, an unknown id: the same 404. */
const benchmarkNotFound = () => notFound('Benchmark');
const destroyed = (b: BenchmarkRow) =>
  new ServiceError('conflict', `The holdings of benchmark ${b.id} were destroyed at their retention (${b.retain_until.toISOString()}): it cannot be computed again; its results stay`, { reason: 'holdings_destroyed', retain_until: b.retain_until.toISOString() });

/**
 * Portfolio benchmarks: holdings submitted to a peer cohort, sealed until the chosen retention destroys them,
 * and signed result versions comparing them with peer figures released under the cohort's anti-leakage rules
 * (release.ts, results.ts). Submitting and refreshing are metered; reads are free.
 */
export class BenchmarksService {
  private readonly sealer: Sealer;

  constructor(private readonly d: BenchmarksDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  private get k() {
    return this.d.config.benchmarkMinCohort;
  }

  private resultDeps() {
    return { clock: this.d.clock, signer: this.d.signer, sealer: this.sealer, k: this.k };
  }

  /** Checks a submission: 501 for the confidential tier, 400 naming the field for anything else. */
  private checked(body: SubmitBody): { cohort: Cohort; holdings: SealedHoldings['holdings']; retainUntil: Date } {
    if (body.privacy_tier === 'confidential') {
      throw new ServiceError('not_implemented', 'privacy_tier "confidential" (computation inside an attested enclave) is not implemented by this gateway; submit with "standard"', { param: 'privacy_tier' });
    }
    const cohort = cohortById(body.cohort);
    if (!cohort) throw invalid(`cohort: no cohort "${body.cohort}"; see GET /v1/benchmarks/cohorts (${COHORTS.map((c) => c.id).join(', ')})`, 'cohort');
    if (body.currency !== undefined && body.currency !== cohort.currency) throw invalid(`currency: the cohort ${cohort.id} is valued in ${cohort.currency}, not ${body.currency}`, 'currency');
    body.holdings.forEach((h, i) => {
      if (!cohort.asset_classes.includes(h.asset_class)) throw invalid(`holdings[${i}].asset_class: "${h.asset_class}" is not a class of ${cohort.id} (${cohort.asset_classes.join(', ')})`, `holdings[${i}].asset_class`);
    });
    const holdings = body.holdings.map((h) => ({ asset_class: h.asset_class, value: normalize(h.value) }));
    if (holdings.every((h) => h.value === '0')) throw invalid('holdings: the portfolio is worth nothing; weights need a positive total', 'holdings');
    const now = this.d.clock.now().getTime();
    const retainUntil = body.retain_until !== undefined ? instantOf(body.retain_until, 'retain_until', { offset: 'required' }) : new Date(now + DEFAULT_RETENTION_MS);
    if (retainUntil.getTime() <= now) throw invalid('retain_until: is in the past; the holdings must be kept until a later time', 'retain_until');
    if (retainUntil.getTime() > now + MAX_RETENTION_MS) throw invalid('retain_until: holdings are kept at most 2 years', 'retain_until');
    return { cohort, holdings, retainUntil };
  }

  async submit(p: KeyPrincipal, body: SubmitBody, ctx: Ctx) {
    const { cohort, holdings, retainUntil } = this.checked(body);
    const id = newId('bm_');
    const sealed: SealedHoldings = { salt: randomBytes(32).toString('hex'), holdings };
    const { result, receipt } = await this.metered(p, ctx, 'POST /v1/benchmarks/portfolio', id, () =>
      this.d.db.transaction().execute(async (trx) => {
        await lockCohort(trx, cohort.id);
        const b = await insertBenchmark(trx, {
          id,
          account_id: p.accountId,
          key_id: p.keyId,
          cohort: cohort.id,
          holdings_sealed: this.sealer.seal(JSON.stringify(sealed), `${id}:holdings`),
          holdings_sha256: saltedSha256(sealed.salt, holdings),
          retain_until: retainUntil,
          destroyed_at: null,
          created_at: this.d.clock.now(),
        });
        return { b, r: await storeResult(trx, b, sealed, cohort, 1, ctx.requestId, this.resultDeps()) };
      }),
    );
    return { view: benchmarkView(result.b, result.r, 1, this.d.clock.now()), receipt };
  }

  /** A new result version from the sealed holdings, under the current methodology; 409 once they were destroyed. */
  async refresh(p: KeyPrincipal, id: string, ctx: Ctx) {
    const b = await ownedBenchmark(this.d.db, p.accountId, id);
    if (!b) throw benchmarkNotFound();
    const now = this.d.clock.now();
    if (b.destroyed_at !== null || b.retain_until.getTime() <= now.getTime()) {
      await destroyDue(this.d.db, now, b.id);
      throw destroyed(b);
    }
    const cohort = cohortById(b.cohort)!;
    const { result, receipt } = await this.metered(p, ctx, 'POST /v1/benchmarks/:benchmarkId/refresh', id, () =>
      this.d.db.transaction().execute(async (trx) => {
        await lockCohort(trx, cohort.id);
        const row = await lockBenchmark(trx, id);
        if (!row || !row.holdings_sealed) throw destroyed(b);
        const last = await latestResult(trx, id);
        const r = await storeResult(trx, row, openHoldings(this.sealer, id, row.holdings_sealed), cohort, (last?.version ?? 0) + 1, ctx.requestId, this.resultDeps());
        return { b: row, r };
      }),
    );
    return { view: benchmarkView(result.b, result.r, result.r.version, this.d.clock.now()), receipt };
  }

  private async metered<T extends { r: ResultRow }>(p: KeyPrincipal, ctx: Ctx, route: string, id: string, work: () => Promise<T>): Promise<{ result: T; receipt: SignedReceipt }> {
    const price = this.d.config.benchmarkPriceMicroUsd;
    const resource = new URL(route.replace(/^\S+ /, '').replace(':benchmarkId', encodeURIComponent(id)), this.d.publicUrl).toString();
    const settled = await this.d.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: price, route, resource }, async () => {
      const result = await work();
      const peers = JSON.parse(result.r.document).peers as { status: string };
      return { result, usage: { costMicroUsd: price, kind: 'benchmark', units: { results: 1 }, detail: { benchmark_id: id, version: result.r.version, methodology_version: METHODOLOGY_VERSION, peers: peers.status } } };
    });
    return { result: settled.result, receipt: settled.receipt };
  }

  async get(accountId: string, id: string) {
    const b = await ownedBenchmark(this.d.db, accountId, id);
    if (!b) throw benchmarkNotFound();
    const all = await results(this.d.db, id);
    return benchmarkView(b, all[0]!, all.length, this.d.clock.now());
  }

  async history(accountId: string, id: string) {
    const b = await ownedBenchmark(this.d.db, accountId, id);
    if (!b) throw benchmarkNotFound();
    return { benchmark_id: id, results: (await results(this.d.db, id)).map(resultView), note: HISTORY_NOTE };
  }

  async cohorts() {
    const counts = await participantCounts(this.d.db, this.d.clock.now());
    return {
      cohorts: COHORTS.map((c) => ({ id: c.id, name: c.name, description: c.description, currency: c.currency, asset_classes: [...c.asset_classes], participants_band: band(counts.get(c.id) ?? 0, this.k), methodology_version: METHODOLOGY_VERSION })),
      anti_leakage: antiLeakage(this.k),
      guarantees_not_implemented: GUARANTEES_NOT_IMPLEMENTED,
    };
  }

  /** The leader's loop: destroys every sealed holdings whose retention has passed. */
  destroyDue(): Promise<number> {
    return destroyDue(this.d.db, this.d.clock.now());
  }
}
