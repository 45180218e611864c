import { createHash } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { ServiceError, Sealer, randomId, type Clock, type Hex, type SignedReceipt } from '@svc/shared';
import type { MediaConfig, MediaProvider, VideoModel } from '../../config/media.ts';
import type { DB, VideoJobsTable } from '../../db/schema.ts';
import { SealedChunks, type Fence } from '../../db/sealed-chunks.ts';
import type { Hold, Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { MediaCatalog } from './catalog.ts';
import { signManifest } from './manifest.ts';
import { UpstreamStatusError, mapped, type MediaClient } from './upstream.ts';

export type JobRow = Selectable<VideoJobsTable>;
export type Status = JobRow['status'];
export const OPEN: Status[] = ['queued', 'running'];

export interface VideoDeps {
  db: Kysely<DB>;
  clock: Clock;
  catalog: MediaCatalog;
  client: MediaClient;
  /** Metering whose holds outlive the render time limit. */
  metering: Metering;
  signer: ReceiptSigner;
  sealer: Sealer;
  cfg: MediaConfig;
}

/** Everything but the sealed bytes. */
export const META_COLUMNS = [
  'id', 'account_id', 'key_id', 'request_id', 'model', 'provider', 'seconds', 'max_seconds', 'price_micro_usd_per_second', 'size', 'image_input', 'upstream_id',
  'status', 'progress', 'hold', 'hold_micro_usd', 'cost_micro_usd', 'billed', 'duration_seconds', 'receipt', 'manifest', 'manifest_signature', 'asset_sha256',
  'content_bytes', 'content_chunks', 'error', 'lock_token', 'locked_until', 'deadline_at', 'created_at', 'updated_at', 'completed_at', 'expires_at', 'content_destroyed_at',
] as const;
export type MetaRow = Omit<JobRow, 'content_sealed'>;

/** An upstream video object (OpenAI Videos API). */
export interface UpstreamVideo {
  id?: unknown;
  status?: unknown;
  progress?: unknown;
  seconds?: unknown;
  error?: unknown;
}

/**
 * Micro-USD for `seconds` of output, rounded up to a whole micro-USD; the product is rounded to 1e-6 first so
 * that binary floating point (0.14 × 10,000 = 1400.0000000000002) does not add one.
 */
/** How long past its render time limit an open job is still polled (see refresh). */
const GIVE_UP_AFTER_DEADLINE_MS = 300_000;
/** Video jobs expired per transaction. */
const EXPIRE_CHUNK = 500;

export const costOf = (seconds: number, perSecond: number): number => Math.ceil(Math.round(seconds * perSecond * 1e6) / 1e6);

const clampProgress = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, Math.min(100, Math.round(v))) : fallback);

/**
 * The video job state machine, shared by creation, the leader's poll loop and cancel. Every transition of
 * an open job happens under a short lease (`lock_token`, `locked_until`) taken with one conditional UPDATE,
 * so the poll and a cancel never both settle or release one hold. queued/running follow the upstream;
 * `completed` downloads the file, settles on its actual duration (never above the hold), signs the
 * manifest and stores the file sealed (succeeded); `failed`, a lost upstream job or the render time limit
 * release the hold (failed); cancel releases it (canceled). Succeeded jobs past expires_at become expired.
 */
export class VideoJobs {
  /** The stored files (`video_chunks`, owner = job id). */
  readonly chunks: SealedChunks;
  constructor(readonly d: VideoDeps) {
    this.chunks = new SealedChunks(d.sealer, 'video_chunks');
  }

  private get leaseMs() {
    return 2 * this.d.cfg.timeoutMs + 60_000;
  }

  /** The job's provider; null when it was removed from the configuration since. */
  provider(row: MetaRow): MediaProvider<VideoModel> | null {
    return this.d.cfg.videoProviders.find((x) => x.name === row.provider) ?? null;
  }

  /** Takes the lease of an open job; null when it is closed or leased by someone else. */
  async claim(id: string): Promise<{ row: MetaRow; token: string } | null> {
    const now = this.d.clock.now();
    const token = randomId(20);
    const row = await this.d.db
      .updateTable('video_jobs')
      .set({ lock_token: token, locked_until: new Date(now.getTime() + this.leaseMs) })
      .where('id', '=', id)
      .where('status', 'in', OPEN)
      .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
      .returning(META_COLUMNS)
      .executeTakeFirst();
    return row ? { row: row as MetaRow, token } : null;
  }

  private async update(id: string, token: string, set: Partial<Record<keyof JobRow, unknown>>, db: Kysely<DB> = this.d.db): Promise<MetaRow | undefined> {
    const row = await db
      .updateTable('video_jobs')
      .set({ ...set, updated_at: this.d.clock.now(), lock_token: null, locked_until: null } as never)
      .where('id', '=', id)
      .where('lock_token', '=', token)
      .returning(META_COLUMNS)
      .executeTakeFirst();
    return row as MetaRow | undefined;
  }

  /** Gives the lease back without a change. */
  unlock(id: string, token: string) {
    return this.update(id, token, {});
  }

  /** Applies an upstream video object to a leased job. */
  async apply(row: MetaRow, token: string, v: UpstreamVideo): Promise<MetaRow | undefined> {
    switch (v.status) {
      case 'completed':
        return this.finalize(row, token, v);
      case 'failed': {
        const msg = typeof (v.error as { message?: unknown } | null)?.message === 'string' ? (v.error as { message: string }).message.slice(0, 500) : 'the render failed upstream';
        return this.close(row, token, 'failed', { type: 'upstream_error', message: msg });
      }
      case 'queued':
        return this.update(row.id, token, { status: 'queued', progress: clampProgress(v.progress, row.progress) });
      default: // in_progress, or a status this gateway does not know yet
        return this.update(row.id, token, { status: 'running', progress: clampProgress(v.progress, row.progress) });
    }
  }

  /** Releases the hold and closes the job unbilled (failed or canceled). */
  async close(row: MetaRow, token: string, status: 'failed' | 'canceled', error: { type: string; message: string } | null): Promise<MetaRow | undefined> {
    if (row.hold) await this.d.metering.release(row.hold as unknown as Hold);
    return this.d.db.transaction().execute(async (trx) => {
      const closed = await this.update(row.id, token, { status, hold: null, cost_micro_usd: 0, billed: false, error: error ? JSON.stringify(error) : null, completed_at: this.d.clock.now() }, trx);
      if (closed) await this.chunks.destroy(trx, [row.id]); // what a download whose process died left
      return closed;
    });
  }

  /** Downloads, settles on the actual duration, signs the manifest, seals the file: succeeded. */
  async finalize(row: MetaRow, token: string, v: UpstreamVideo): Promise<MetaRow | undefined> {
    const provider = this.provider(row);
    if (!provider) return this.close(row, token, 'failed', { type: 'upstream_error', message: `the provider ${row.provider} is no longer configured` });
    let file: { bytes: number; chunks: number; digest: string };
    try {
      file = await this.store(row.id, token, provider, `/videos/${encodeURIComponent(row.upstream_id!)}/content`);
    } catch (e) {
      await this.unlock(row.id, token); // the next poll tries again, until the render time limit
      throw mapped(e);
    }
    const reported = typeof v.seconds === 'number' ? v.seconds : typeof v.seconds === 'string' ? Number(v.seconds) : NaN;
    let seconds = Number.isFinite(reported) && reported > 0 ? Math.min(reported, row.max_seconds) : row.seconds;
    const hold = row.hold as unknown as Hold;
    const digest = file.digest;
    let cost = Math.min(costOf(seconds, row.price_micro_usd_per_second), hold.amount);
    const usage = {
      costMicroUsd: cost,
      kind: 'video',
      model: row.model,
      units: { seconds },
      detail: { job_id: row.id, backend: `provider:${provider.name}`, size: row.size, requested_seconds: row.seconds, held_micro_usd: hold.amount, asset_sha256: digest },
    };
    // A process that died after the charge committed and before the job row was written left the receipt:
    // this pass finishes the job on that charge instead of charging again (which the receipt's id refuses).
    const prior = await this.priorCharge(row.request_id, row.id).catch(async (e: unknown) => {
      await this.unlock(row.id, token);
      throw e;
    });
    const { receipt } = prior
      ? { receipt: prior }
      : await this.d.metering.settle(hold, usage).catch(async (e: unknown) => {
          await this.unlock(row.id, token);
          throw e;
        });
    if (prior) {
      cost = prior.payload.cost_micro_usd;
      const charged = (prior.payload.units as { seconds?: unknown } | undefined)?.seconds;
      if (typeof charged === 'number') seconds = charged;
    }
    const now = this.d.clock.now();
    const prov = signManifest(this.d.signer, { mediaType: 'video/mp4', assetSha256: digest, model: row.model, createdAt: now, receipt, jobId: row.id });
    const succeeded = {
      status: 'succeeded',
      progress: 100,
      hold: null,
      cost_micro_usd: cost,
      billed: true,
      duration_seconds: seconds,
      receipt: JSON.stringify({ payload: receipt.payload, canonical: receipt.canonical, hash: receipt.hash, signature: receipt.signature }),
      manifest: JSON.stringify(prov.manifest),
      manifest_signature: prov.signature,
      asset_sha256: digest,
      content_bytes: file.bytes,
      content_chunks: file.chunks,
      completed_at: now,
      expires_at: new Date(now.getTime() + this.d.cfg.video.ttlSeconds * 1000),
    };
    // The file is the job's once this conditional update takes the row (the lease holder's alone).
    const done = await this.update(row.id, token, succeeded);
    // The file is ours now; the upstream copy goes (best-effort). Not when the lease was lost: the job is then
    // another pass's, which needs the upstream copy.
    if (done) await this.d.client.json(provider, 'DELETE', `/videos/${encodeURIComponent(row.upstream_id!)}`).catch(() => undefined);
    return done;
  }

  /**
   * Downloads the job's file into its chunks (owner = job id) as it arrives, hashing it on the way, outside
   * any one transaction. Every write and delete of the chunks is fenced by the lease (`holding`, in the same
   * transaction): a pass whose lease ran out (it stalled, and another pass took the job) can neither add to
   * nor delete the chunks of the pass that holds it now. Chunks an earlier attempt left (its process died
   * before the job's row was written) are deleted first; a failed download deletes its own.
   */
  private async store(jobId: string, token: string, provider: MediaProvider<VideoModel>, path: string): Promise<{ bytes: number; chunks: number; digest: string }> {
    const fenced: Fence = (work) =>
      this.d.db.transaction().execute(async (trx) => {
        await this.holding(trx, jobId, token);
        await work(trx);
      });
    await fenced((trx) => this.chunks.destroy(trx, [jobId]));
    const hash = createHash('sha256');
    const w = this.chunks.writer(this.d.db, jobId, fenced);
    try {
      const bytes = await this.d.client.download(provider, path, async (piece) => {
        hash.update(piece);
        await w.write(piece);
      });
      if (bytes === 0) throw new ServiceError('upstream_error', `Provider ${provider.name} served an empty video`);
      const { chunks } = await w.end();
      return { bytes, chunks, digest: hash.digest('hex') };
    } catch (e) {
      await fenced((trx) => this.chunks.destroy(trx, [jobId])).catch(() => undefined); // not once the lease is another's
      throw e;
    }
  }

  /** The lease is still `token`'s (and lasts a lease from now): inside the transaction that acts on it. */
  private async holding(trx: Kysely<DB>, id: string, token: string): Promise<void> {
    const r = await trx.updateTable('video_jobs').set({ locked_until: new Date(this.d.clock.now().getTime() + this.leaseMs) }).where('id', '=', id).where('lock_token', '=', token).executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new ServiceError('conflict', `Video job ${id}: its lease passed to another pass`);
  }

  /** One poll of a leased job: follow the upstream, or fail it at the render time limit. */
  async refresh(row: MetaRow, token: string): Promise<MetaRow | undefined> {
    const now = this.d.clock.now();
    if (!row.upstream_id) return this.close(row, token, 'failed', { type: 'upstream_error', message: 'the render never started upstream' });
    const provider = this.provider(row);
    if (!provider) return this.close(row, token, 'failed', { type: 'upstream_error', message: `the provider ${row.provider} is no longer configured` });
    const path = `/videos/${encodeURIComponent(row.upstream_id)}`;
    const late = now >= row.deadline_at;
    const timedOut = async () => {
      await this.d.client.json(provider, 'DELETE', path).catch(() => undefined);
      return this.close(row, token, 'failed', { type: 'upstream_timeout', message: `the render did not finish within ${this.d.cfg.video.renderTimeoutSeconds} s` });
    };
    // Asked even past the time limit: a render that finished is delivered and billed however late the poll
    // comes to it (a leader restart, a backlog). The hold lasts 2 × the media timeout + 600 s past the limit
    // (media/deps.ts) and a pass (the lookup, then the download) can take 2 × the media timeout: a job still
    // open 300 s past the limit is given up, so that the last pass settles 300 s before the hold ends.
    if (now.getTime() >= row.deadline_at.getTime() + GIVE_UP_AFTER_DEADLINE_MS) return timedOut();
    let v: UpstreamVideo;
    try {
      v = await this.d.client.json(provider, 'GET', path);
    } catch (e) {
      if (e instanceof UpstreamStatusError && e.status === 404) return this.close(row, token, 'failed', { type: 'upstream_error', message: 'the provider no longer knows this render' });
      await this.unlock(row.id, token); // transient: the next poll tries again, until the give-up above
      throw mapped(e);
    }
    if (late && v.status !== 'completed' && v.status !== 'failed') return timedOut();
    return this.apply(row, token, v);
  }

  /** The signed receipt stored under this request id, if its charge committed already. */
  private async priorCharge(requestId: string, jobId: string): Promise<SignedReceipt | null> {
    const r = await this.d.db.selectFrom('receipts').select(['payload', 'hash', 'signature']).where('id', '=', requestId).executeTakeFirst();
    if (!r) return null;
    const payload = JSON.parse(r.payload) as SignedReceipt['payload'];
    return (payload.detail as { job_id?: unknown } | undefined)?.job_id === jobId ? { payload, canonical: r.payload, hash: r.hash as Hex, signature: r.signature as Hex } : null;
  }

  /** The leader's loop: every open job once. */
  async pollOpen(log?: (err: unknown, id: string) => void): Promise<number> {
    const now = this.d.clock.now();
    const open = await this.d.db
      .selectFrom('video_jobs')
      .select('id')
      .where('status', 'in', OPEN)
      .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
      .orderBy('updated_at')
      .limit(200)
      .execute();
    let n = 0;
    for (const { id } of open) {
      const c = await this.claim(id);
      if (!c) continue;
      try {
        await this.refresh(c.row, c.token);
        n++;
      } catch (e) {
        log?.(e, id);
      }
    }
    return n;
  }

  /** Succeeded jobs past expires_at: expired, content destroyed (EXPIRE_CHUNK jobs per transaction). */
  async expireDue(id?: string): Promise<number> {
    const now = this.d.clock.now();
    let total = 0;
    for (;;) {
      const { due, done } = await this.d.db.transaction().execute(async (trx) => {
        let due = trx.selectFrom('video_jobs').select('id').where('status', '=', 'succeeded').where('expires_at', '<=', now);
        if (id) due = due.where('id', '=', id);
        const ids = (await due.limit(EXPIRE_CHUNK).execute()).map((r) => r.id);
        if (ids.length === 0) return { due: 0, done: 0 };
        const expired = await trx
          .updateTable('video_jobs')
          .set((eb) => ({ status: 'expired' as const, content_sealed: null, content_chunks: null, content_destroyed_at: eb.fn.coalesce('content_destroyed_at', eb.val(now)), updated_at: now }))
          .where('id', 'in', ids)
          .where('status', '=', 'succeeded')
          .returning('id')
          .execute();
        await this.chunks.destroy(trx, expired.map((r) => r.id));
        return { due: ids.length, done: expired.length };
      });
      total += done;
      if (due < EXPIRE_CHUNK) return total;
    }
  }
}
