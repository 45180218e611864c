import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { usageView, type UsageEventView } from './usage-view.ts';

type Listener = (e: UsageEventView) => void;

/** Events a stream resumed with Last-Event-ID replays at most; the rest are named in a `gap` event. */
export const REPLAY_MAX = 1000;

/**
 * Fan-out of new metering events to SSE subscribers. Each settled batch NOTIFYs `svc_usage` from whichever
 * process settles it; every process LISTENs once and forwards events to its own subscribers of the account.
 */
export class UsageStreams {
  private readonly subs = new Map<string, Set<Listener>>();
  private unlisten: (() => Promise<void>) | undefined;
  constructor(private readonly db: Kysely<DB>) {}

  async start(database: Database): Promise<void> {
    this.unlisten = await database.listen('svc_usage', (payload) => void this.onNotify(payload));
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.subs.clear();
  }

  /** Payload: a JSON array of [account_id, usage_event_id] pairs, one NOTIFY per settled batch. */
  private async onNotify(payload: string): Promise<void> {
    let pairs: unknown;
    try {
      pairs = JSON.parse(payload);
    } catch {
      return;
    }
    if (!Array.isArray(pairs)) return;
    const wanted = pairs.filter((p): p is [string, string] => Array.isArray(p) && typeof p[0] === 'string' && typeof p[1] === 'string' && this.subs.has(p[0]));
    if (wanted.length === 0) return;
    const rows = await this.db.selectFrom('usage_events').selectAll().where('id', 'in', wanted.map((p) => p[1])).orderBy('n').execute();
    for (const row of rows) this.subs.get(row.account_id)?.forEach((l) => l(usageView(row)));
  }

  subscribe(accountId: string, fn: Listener): () => void {
    let set = this.subs.get(accountId);
    if (!set) this.subs.set(accountId, (set = new Set()));
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.subs.delete(accountId);
    };
  }

  /**
   * Events after `seq` (for Last-Event-ID resumption), oldest first, at most REPLAY_MAX. When more are
   * waiting, `gap` names the ones not replayed: after `afterSeq` through `throughSeq` (the newest now), which
   * the stream skips and `/v1/usage/events` lists.
   */
  async since(accountId: string, seq: number): Promise<{ events: UsageEventView[]; gap: UsageGap | null }> {
    const rows = await this.db.selectFrom('usage_events').selectAll().where('account_id', '=', accountId).where('n', '>', seq).orderBy('n').limit(REPLAY_MAX).execute();
    const events = rows.map(usageView);
    if (rows.length < REPLAY_MAX) return { events, gap: null };
    const after = rows.at(-1)!.n;
    const rest = await this.db
      .selectFrom('usage_events')
      .select((eb) => [eb.fn.countAll<number>().as('missed'), eb.fn.max('n').as('through')])
      .where('account_id', '=', accountId)
      .where('n', '>', after)
      .executeTakeFirstOrThrow();
    const missed = Number(rest.missed);
    return { events, gap: missed > 0 ? { afterSeq: after, throughSeq: Number(rest.through), missed } : null };
  }
}

/** Events a resumed stream did not replay: after `afterSeq` through `throughSeq`, `missed` of them. */
export interface UsageGap {
  afterSeq: number;
  throughSeq: number;
  missed: number;
}
