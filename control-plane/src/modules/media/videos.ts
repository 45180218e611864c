import { PREFIX, ServiceError, newId, notFound, randomId } from '@svc/shared';
import type { VideoModel } from '../../config/media.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { aspectRatio } from './catalog.ts';
import type { CallContext } from './images.ts';
import { ChunkMissing } from '../../db/sealed-chunks.ts';
import { META_COLUMNS, OPEN, VideoJobs, type MetaRow, type UpstreamVideo, type VideoDeps } from './video-jobs.ts';
import { mapped } from './upstream.ts';

export interface VideoRequest {
  model: string;
  prompt: string;
  seconds?: number | undefined;
  size?: string | undefined;
  aspect_ratio?: string | undefined;
  image?: string | undefined;
}

const invalid = (param: string, message: string) => new ServiceError('invalid_request', `${param}: ${message}`, { param });
const iso = (d: Date | null) => (d ? d.toISOString() : null);

interface StoredReceipt {
  payload: { id: string; signer: string } & Record<string, unknown>;
  canonical: string;
  hash: string;
  signature: string;
}

/** The public job object; metadata only (never the prompt or the file). */
export function jobView(row: MetaRow, now: Date) {
  const expired = row.status === 'succeeded' && row.expires_at !== null && row.expires_at <= now;
  const status = expired ? 'expired' : row.status;
  const r = row.receipt as unknown as StoredReceipt | null;
  return {
    id: row.id,
    object: 'video.generation' as const,
    model: row.model,
    status,
    progress: row.progress,
    seconds: row.seconds,
    size: row.size,
    image_input: row.image_input,
    created_at: row.created_at.toISOString(),
    completed_at: iso(row.completed_at),
    expires_at: iso(row.expires_at),
    asset_available: status === 'succeeded' && row.content_destroyed_at === null,
    content_destroyed_at: iso(row.content_destroyed_at),
    content_bytes: row.content_bytes === null ? null : Number(row.content_bytes),
    duration_seconds: row.duration_seconds,
    reserved_micro_usd: Number(row.hold_micro_usd),
    cost_micro_usd: row.cost_micro_usd === null ? null : Number(row.cost_micro_usd),
    billed: row.billed,
    error: row.error as { type: string; message: string } | null,
    receipt: r ? { id: r.payload.id, payload: r.payload, canonical: r.canonical, hash: r.hash, signature: r.signature, signer: r.payload.signer } : null,
    manifest: (row.manifest as Record<string, unknown> | null) ?? null,
    manifest_signature: row.manifest_signature,
  };
}
export type JobView = ReturnType<typeof jobView>;

/**
 * The video routes' service: create (hold the model's maximum duration, start the upstream render, 202),
 * read, download, cancel, destroy. Transitions of open jobs go through VideoJobs under its lease.
 */
export class VideoService {
  readonly jobs: VideoJobs;
  constructor(private readonly d: VideoDeps) {
    this.jobs = new VideoJobs(d);
  }

  private view = (row: MetaRow) => jobView(row, this.d.clock.now());

  private seconds(m: VideoModel, asked: number | undefined): number {
    const s = asked ?? m.defaultSeconds;
    if (!Number.isInteger(s) || s < 1 || s > m.maxSeconds) throw invalid('seconds', `the model ${m.id} renders a whole number of seconds from 1 to ${m.maxSeconds}`);
    if (m.seconds && !m.seconds.includes(s)) throw invalid('seconds', `the model ${m.id} renders ${m.seconds.join(', ')} seconds`);
    return s;
  }

  private size(m: VideoModel, size: string | undefined, ratio: string | undefined): string {
    if (size !== undefined && !m.resolutions.includes(size)) throw invalid('size', `the model ${m.id} renders ${m.resolutions.join(', ')}`);
    if (ratio === undefined) return size ?? m.resolutions[0]!;
    const fits = m.resolutions.filter((r) => aspectRatio(r) === ratio);
    if (!fits.length) throw invalid('aspect_ratio', `the model ${m.id} renders ${[...new Set(m.resolutions.map(aspectRatio))].join(', ')}`);
    if (size !== undefined && aspectRatio(size) !== ratio) throw invalid('aspect_ratio', `${ratio} does not match size ${size}`);
    return size ?? fits[0]!;
  }

  async create(p: KeyPrincipal, body: VideoRequest, ctx: CallContext): Promise<JobView> {
    const { provider, model } = this.d.catalog.video(body.model);
    const seconds = this.seconds(model, body.seconds);
    const size = this.size(model, body.size, body.aspect_ratio);
    const price = model.pricePerSecondMicroUsd;
    const hold = await this.d.metering.hold({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: model.maxSeconds * price, route: ctx.route, resource: ctx.resource, durable: true });
    const now = this.d.clock.now();
    const id = newId(PREFIX.video, 24);
    const token = randomId(20);
    const base = {
      id, account_id: p.accountId, key_id: p.keyId, request_id: ctx.requestId, model: model.id, provider: provider.name, seconds, max_seconds: model.maxSeconds,
      price_micro_usd_per_second: price, size, image_input: body.image !== undefined, status: 'queued' as const, hold_micro_usd: hold.amount,
      deadline_at: new Date(now.getTime() + this.d.cfg.video.renderTimeoutSeconds * 1000), created_at: now, updated_at: now,
    };
    let row: MetaRow;
    try {
      // Leased from the start, so the poll leaves it alone until the upstream id is known.
      row = (await this.d.db
        .insertInto('video_jobs')
        .values({ ...base, hold: JSON.stringify(hold), lock_token: token, locked_until: new Date(now.getTime() + 2 * this.d.cfg.timeoutMs + 60_000) })
        .returning(META_COLUMNS)
        .executeTakeFirstOrThrow()) as MetaRow;
    } catch (e) {
      await this.d.metering.release(hold).catch(() => undefined);
      throw e;
    }
    let v: UpstreamVideo;
    try {
      const upstream: Record<string, unknown> = { model: model.id, prompt: body.prompt, seconds: String(seconds), size };
      if (body.image !== undefined) upstream.input_reference = { image_url: body.image };
      v = await this.d.client.json(provider, 'POST', '/videos', upstream);
      if (typeof v.id !== 'string' || !v.id) throw new ServiceError('upstream_error', `Provider ${provider.name} answered no video id`);
    } catch (e) {
      // Refused or unreachable: nothing was started, so nothing stays behind.
      await this.d.metering.release(hold).catch(() => undefined);
      await this.d.db.deleteFrom('video_jobs').where('id', '=', id).execute();
      throw mapped(e);
    }
    await this.d.db.updateTable('video_jobs').set({ upstream_id: v.id as string }).where('id', '=', id).execute();
    try {
      return this.view((await this.jobs.apply({ ...row, upstream_id: v.id as string }, token, v)) ?? (await this.owned(p.accountId, id)));
    } catch {
      return this.view(await this.owned(p.accountId, id)); // e.g. a finished render whose download failed: the poll retries
    }
  }

  private async owned(accountId: string, id: string): Promise<MetaRow> {
    const row = await this.d.db.selectFrom('video_jobs').select(META_COLUMNS).where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!row) throw notFound(`Video job ${id}`);
    return row as MetaRow;
  }

  async list(accountId: string, limit: number): Promise<JobView[]> {
    const rows = await this.d.db.selectFrom('video_jobs').select(META_COLUMNS).where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.map((r) => this.view(r as MetaRow));
  }

  async get(accountId: string, id: string): Promise<JobView> {
    return this.view(await this.owned(accountId, id));
  }

  /** The file, while asset_available; a job past expires_at is expired (and its file destroyed) on the spot. */
  async content(accountId: string, id: string): Promise<{ bytes: number; body: Iterable<Buffer> | AsyncIterable<Buffer> }> {
    const row = await this.owned(accountId, id);
    const v = this.view(row);
    if (OPEN.includes(row.status)) throw new ServiceError('conflict', `Video job ${id} is still ${row.status}; its file is available once it succeeded`);
    if (v.status === 'expired' && row.status === 'succeeded') await this.jobs.expireDue(id);
    if (!v.asset_available) throw new ServiceError('not_found', `Video job ${id} has no file (status ${v.status}${v.content_destroyed_at ? ', content destroyed' : ''})`);
    const stored = await this.d.db.selectFrom('video_jobs').select(['content_sealed', 'content_chunks', 'content_bytes']).where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    const destroyed = () => new ServiceError('not_found', `Video job ${id} has no file (content destroyed)`);
    if (!stored || (!stored.content_sealed && stored.content_chunks === null) || stored.content_bytes === null) throw destroyed();
    const body = await this.jobs.chunks.open(this.d.db, id, stored.content_sealed).catch((e: unknown) => {
      throw e instanceof ChunkMissing ? destroyed() : e; // deleted or expired since the row was read
    });
    return { bytes: Number(stored.content_bytes), body };
  }

  /**
   * Best-effort cancel. A render that already finished (here or upstream) is delivered and billed
   * (`billed: true`); one still in progress is stopped upstream, its hold released, nothing billed.
   */
  async cancel(accountId: string, id: string): Promise<JobView> {
    const row = await this.owned(accountId, id);
    if (!OPEN.includes(row.status)) return this.view(row);
    const c = await this.jobs.claim(id);
    if (!c) {
      const now = await this.owned(accountId, id);
      if (!OPEN.includes(now.status)) return this.view(now);
      throw new ServiceError('conflict', `Video job ${id} is being updated right now; retry the cancel`);
    }
    const provider = this.jobs.provider(c.row);
    const path = provider && c.row.upstream_id ? `/videos/${encodeURIComponent(c.row.upstream_id)}` : null;
    const v = provider && path ? await this.d.client.json(provider, 'GET', path).catch(() => null) : null;
    if (v?.status === 'completed') {
      // Finished: delivered and billed, never cancelled. When its file cannot be fetched now, finalize gave the
      // job back and the poll delivers it.
      const done = await this.jobs.finalize(c.row, c.token, v).catch(() => undefined);
      if (done) return this.view(done);
      throw new ServiceError('conflict', `Video job ${id} finished rendering, so it is delivered and billed rather than cancelled; its file could not be fetched yet and will be shortly`);
    }
    if (provider && path) await this.d.client.json(provider, 'DELETE', path).catch(() => undefined);
    const closed = await this.jobs.close(c.row, c.token, 'canceled', null);
    return this.view(closed ?? (await this.owned(accountId, id)));
  }

  /** Destroys the stored file now; the content-free row and its receipt remain. */
  async destroy(accountId: string, id: string): Promise<JobView> {
    const row = await this.owned(accountId, id);
    if (OPEN.includes(row.status)) throw new ServiceError('conflict', `Video job ${id} is still ${row.status}; cancel it first (POST /v1/videos/generations/${id}/cancel)`);
    const now = this.d.clock.now();
    const done = await this.d.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('video_jobs')
        .set((eb) => ({ content_sealed: null, content_chunks: null, content_destroyed_at: eb.fn.coalesce('content_destroyed_at', eb.val(now)), updated_at: now }))
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .returning(META_COLUMNS)
        .executeTakeFirstOrThrow();
      await this.jobs.chunks.destroy(trx, [id]);
      return row;
    });
    return this.view(done as MetaRow);
  }
}
