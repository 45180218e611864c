import { sql, type Kysely } from 'kysely';
import { ServiceError, type Clock } from '@svc/shared';
import type { BatchesConfig } from '../../config/batches.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { assertKeyBounds } from '../../http/key-bounds.ts'; // mandates
import { guardRequest } from '../guardrails/enforce.ts'; // guardrails
import type { FilesService } from '../files/service.ts';
import type { BatchLine } from '../files/jsonl.ts';
import type { CallContext, InferenceService } from '../inference/service.ts';
import { finalizeBatch, type BatchEnd, type BatchFailure } from './finalize.ts';
import { LineStore, type Claim, type RunningLine } from './lines.ts';
import { errorBody } from './output.ts';
import { ACTIVE, type BatchRow } from './service.ts';

export interface RunnerDeps {
  db: Kysely<DB>;
  clock: Clock;
  files: FilesService;
  lines: LineStore;
  inference: InferenceService;
  /** Rebuilds the principal of the key that created a batch, checked as the auth layer checks it. */
  principalOf(keyId: string): Promise<KeyPrincipal>;
  cfg: BatchesConfig;
  /** How long a line another process left running (uncharged) is left alone before it is run again: the hold TTL. */
  leaseMs: number;
  publicUrl: URL;
  log: { error(obj: object, msg: string): void };
}

/**
 * Parsed inputs kept between passes, up to this many bytes of input files, and always at least one (the
 * leader decrypts and parses an input once, not every second). A pass visits its batches in the same order each time, so evicting one for
 * another would miss on every visit: once full, further inputs are read per pass until a kept one leaves (its
 * batch ended, or left the pass).
 */
const INPUT_CACHE_BYTES = 64 * 1024 * 1024;

const INPUT_GONE: BatchFailure = { code: 'input_unavailable', message: 'The content of the input file is gone (its hard TTL passed); no further line can run.' };

/**
 * Runs batches on the leader's loop. Each tick takes every active batch in turn: it settles lines earlier
 * processes left running (charged: their stored answer stands; uncharged and past the lease: run again with
 * the same request id, so a line is charged at most once: the receipt's primary key is the request id),
 * starts up to `linesPerTick` new lines, `concurrency` at a time, through the metered inference service under
 * the creating key, and ends the batch when every line ran, it was cancelled, or its window passed.
 */
export class BatchRunner {
  private current: Promise<void> | null = null;
  private stopping = false;
  private readonly abort = new AbortController();
  private readonly inputs = new Map<string, { lines: BatchLine[]; expiresAt: Date; bytes: number }>();
  private inputBytes = 0;

  constructor(private readonly d: RunnerDeps) {}

  /** One pass over the active batches; concurrent calls share the pass in progress. */
  tick(): Promise<void> {
    this.current ??= this.pass().finally(() => {
      this.current = null;
    });
    return this.current;
  }

  /** Aborts lines in flight (uncharged ones are given back unrun) and waits for the pass to end. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort(new Error('the gateway is stopping'));
    await this.current?.catch(() => undefined);
  }

  private async pass(): Promise<void> {
    // Every batch that only has to end (cancelled, or past its window), then up to batchesPerTick others taken
    // in turn across accounts (each account's oldest first), so one account's many batches hold up nobody
    // else's start, cancel or expiry.
    const now = this.d.clock.now();
    const ending = await this.d.db.selectFrom('batches').selectAll().where('status', 'in', ACTIVE).where((w) => w.or([w('status', '=', 'cancelling'), w('expires_at', '<=', now)])).orderBy('n').execute();
    const turn = await this.d.db
      .selectFrom((s) =>
        s.selectFrom('batches').selectAll().select(sql<number>`row_number() over (partition by account_id order by n)`.as('turn')).where('status', 'in', ACTIVE).where('status', '<>', 'cancelling').where('expires_at', '>', now).as('b'),
      )
      .selectAll()
      .orderBy('turn')
      .orderBy('n')
      .limit(this.d.cfg.batchesPerTick)
      .execute();
    const batches: BatchRow[] = [...ending, ...turn.map(({ turn: _, ...b }) => b as BatchRow)];
    const active = new Set(batches.map((b) => b.id));
    for (const id of this.inputs.keys()) if (!active.has(id)) this.forget(id);
    for (const b of batches) {
      if (this.stopping) return;
      try {
        await this.advance(b);
      } catch (err) {
        this.d.log.error({ err, batch_id: b.id }, 'batch step failed');
      }
    }
  }

  private past(b: BatchRow): boolean {
    return this.d.clock.now().getTime() >= b.expires_at.getTime();
  }

  /** The batch's input lines; null once the content is gone (the cached copy never outlives the file's TTL). */
  private async input(b: BatchRow): Promise<BatchLine[] | null> {
    const hit = this.inputs.get(b.id);
    if (hit && hit.expiresAt.getTime() > this.d.clock.now().getTime()) return hit.lines;
    this.forget(b.id);
    const opened = await this.d.files.openBatchInput(b.input_file_id);
    if (!opened) return null;
    // One input is always kept, whatever its size (a single large batch must not be read every pass).
    if (this.inputs.size === 0 || this.inputBytes + opened.bytes <= INPUT_CACHE_BYTES) {
      this.inputs.set(b.id, opened);
      this.inputBytes += opened.bytes;
    }
    return opened.lines;
  }

  private forget(id: string): void {
    const kept = this.inputs.get(id);
    if (!kept) return;
    this.inputs.delete(id);
    this.inputBytes -= kept.bytes;
  }

  private reload(id: string) {
    return this.d.db.selectFrom('batches').selectAll().where('id', '=', id).executeTakeFirst();
  }

  private async advance(first: BatchRow): Promise<void> {
    let b: BatchRow | undefined = first;
    let input: BatchLine[] | null;
    try {
      input = await this.input(b);
    } catch (err) {
      // An input that cannot be opened or read (a changed seal key, lines a stricter schema refuses) is tried
      // again next pass, but never keeps a cancelled batch or one past its window from ending.
      if (b.status !== 'cancelling' && !this.past(b)) throw err;
      this.d.log.error({ err, batch_id: b.id }, 'batch input unreadable; ending the batch without it');
      input = null;
    }
    if (b.status === 'validating' && input && !this.past(b)) {
      await this.d.db.updateTable('batches').set({ status: 'in_progress', in_progress_at: this.d.clock.now() }).where('id', '=', b.id).where('status', '=', 'validating').execute();
      b = await this.reload(b.id);
      if (!b) return;
    }
    let { waiting, retry } = await this.recover(b);
    if (b.status === 'in_progress' && input && !this.past(b)) {
      await this.runLines(b, input, retry);
      b = await this.reload(b.id);
      if (!b || !ACTIVE.includes(b.status)) return;
      ({ waiting } = await this.recover(b));
    }
    const end: BatchEnd | null =
      b.status === 'cancelling' ? 'cancelled' : this.past(b) ? 'expired' : !input ? 'failed' : (await this.d.lines.ended(b.id)) >= b.total ? 'completed' : null;
    if (!end || waiting > 0) return;
    await finalizeBatch(this.d, b, end, input, end === 'failed' ? INPUT_GONE : undefined);
    this.forget(b.id);
  }

  /**
   * Lines left running by an earlier process (at the start of a pass this process has none in flight).
   * Charged ones are finished: their answer was stored before the charge, or is reported lost with the
   * receipt. Uncharged ones wait out the lease (a process that still runs them settles or releases within
   * the hold TTL), then are returned for another attempt.
   */
  private async recover(b: BatchRow): Promise<{ waiting: number; retry: RunningLine[] }> {
    let waiting = 0;
    const retry: RunningLine[] = [];
    const now = this.d.clock.now().getTime();
    for (const r of await this.d.lines.running(b.id)) {
      if (await this.d.lines.charged(r.request_id)) {
        await this.d.lines.finish(b.id, r.line, r.attempt, r.has_output ? 'succeeded' : 'failed', r.has_output ? r.status_code : null);
      } else if (r.claimed_at.getTime() + this.d.leaseMs > now) waiting++;
      else retry.push(r);
    }
    return { waiting, retry };
  }

  private async runLines(b: BatchRow, input: BatchLine[], retry: RunningLine[]): Promise<void> {
    const claimed = await this.d.lines.claimed(b.id);
    const work: Array<{ line: BatchLine; retry?: RunningLine }> = [];
    for (const r of retry) if (input[r.line - 1]) work.push({ line: input[r.line - 1]!, retry: r });
    for (const l of input) {
      if (work.length >= this.d.cfg.linesPerTick) break;
      if (!claimed.has(l.line)) work.push({ line: l });
    }
    let next = 0;
    let halted = false;
    const worker = async () => {
      while (!halted && !this.stopping && next < work.length) {
        const w = work[next++]!;
        let claim: Claim | null;
        try {
          claim = w.retry ? await this.d.lines.reclaim(b.id, w.retry) : await this.d.lines.claim(b.id, w.line);
        } catch (err) {
          // Not claimed (the database refused or failed): the other lines carry on; this one is tried next pass.
          this.d.log.error({ err, batch_id: b.id, line: w.line.line }, 'batch line not claimed');
          continue;
        }
        if (!claim) {
          // Claimed elsewhere, or the batch stopped running (cancelled, window passed): check which.
          const cur = await this.reload(b.id);
          if (cur?.status !== 'in_progress' || this.past(cur)) halted = true;
          continue;
        }
        await this.runOne(b, w.line, claim).catch((err: unknown) => this.d.log.error({ err, batch_id: b.id, line: w.line.line }, 'batch line not recorded; recovery settles it'));
      }
    };
    // Every worker ends before the pass does, so no line of this process is in flight between passes.
    await Promise.allSettled(Array.from({ length: Math.min(this.d.cfg.concurrency, work.length) }, worker));
  }

  private async runOne(b: BatchRow, l: BatchLine, c: Claim): Promise<void> {
    const embeddings = l.url === '/v1/embeddings';
    try {
      const p = await this.d.principalOf(b.key_id);
      if (!p.scopes.includes('inference')) throw new ServiceError('insufficient_scope', 'This API key lacks the "inference" scope', { required_scope: 'inference' });
      assertKeyBounds(p, 'POST', l.url, l.body); // mandates: the key's route and model allow lists, as on a request
      const guard = guardRequest(p, embeddings ? 'embeddings' : 'chat.completions', l.body); // guardrails: the key's policy, as on a request
      const ctx: CallContext = {
        requestId: c.requestId,
        runId: null,
        route: `POST ${l.url}`,
        resource: new URL(l.url, this.d.publicUrl).toString(),
        endpoint: embeddings ? 'embeddings' : 'chat.completions',
        signal: this.abort.signal,
        discountPercent: this.d.cfg.discountPercent,
        beforeSettle: (body) => this.d.lines.storeAnswer(b.id, l.line, c, body),
        guard, // guardrails
      };
      await (embeddings ? this.d.inference.embeddings(p, l.body, ctx) : this.d.inference.chat(p, l.body, ctx));
      await this.d.lines.finish(b.id, l.line, c.attempt, 'succeeded', 200);
    } catch (e) {
      // Charged already (the failure came after the settle): recovery finishes it from the stored answer.
      if (await this.d.lines.charged(c.requestId)) return;
      if (this.stopping) return this.d.lines.release(b.id, l.line, c.attempt);
      if (!(e instanceof ServiceError)) this.d.log.error({ err: e, batch_id: b.id, line: l.line }, 'batch line failed');
      const err = e instanceof ServiceError ? e : new ServiceError('internal_error', 'Internal error; quote the request_id when reporting it');
      await this.d.lines.finish(b.id, l.line, c.attempt, 'failed', err.status, this.d.lines.seal(c.requestId, errorBody(err, c.requestId)));
    }
  }
}
