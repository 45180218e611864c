import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { appendEvent, type ChainedEvent } from './chain.ts';
import type { LegacyService } from './service.ts';
import { confirmations, dueForRelease, dueForWarning, planById } from './store.ts';

/** Plans moved per step of one tick; more wait for the next. */
const BATCH = 200;

/**
 * The leader's loop over Legacy plans, on the injected clock:
 * - active, deadline passed: warning (`warning` chained; the grace period starts now);
 * - warning, grace period over and the attester quorum (if any) met: released (`released` chained).
 * Each move is a conditional change under the plan's row lock, committed with its chained event and that
 * event's place in the anchor queue (a process that dies mid-move leaves the plan as it was, still due), so a
 * plan is warned and released exactly once, and each event queued for anchoring once, however many processes
 * or ticks race; a plan checked in or cancelled meanwhile is left alone. A tick that runs late (no leader for
 * a while) moves every due plan once: a plan is never released in the tick that warned it, since the grace
 * period counts from the warning.
 */
export class LegacyLifecycle {
  constructor(private readonly svc: LegacyService) {}

  async tick(): Promise<{ warned: number; released: number }> {
    const d = this.svc.d;
    const now = d.clock.now();
    let warned = 0;
    let released = 0;
    // Each move, its chained event and the event's anchor queue entry commit together.
    const chain = async (trx: Kysely<DB>, id: string, ev: ChainedEvent) => {
      await d.stepFault?.('legacy.plan_moved', id);
      await this.svc.anchor(trx, id, [ev]);
      return true;
    };
    for (const id of await dueForWarning(d.db, now, BATCH)) {
      const moved = await d.db.transaction().execute(async (trx) => {
        const p = await planById(trx, id, true);
        if (!p || p.status !== 'active' || p.deadline_at.getTime() > now.getTime()) return false;
        await trx.updateTable('legacy_plans').set({ status: 'warning', warned_at: now }).where('id', '=', id).execute();
        return chain(trx, id, await appendEvent(trx, p, 'warning', now, { deadline_at: p.deadline_at.toISOString(), release_earliest_at: new Date(now.getTime() + p.grace_seconds * 1000).toISOString() }));
      });
      if (moved) warned++;
    }
    for (const id of await dueForRelease(d.db, now, BATCH)) {
      const moved = await d.db.transaction().execute(async (trx) => {
        const p = await planById(trx, id, true);
        if (!p || p.status !== 'warning' || !p.warned_at || p.warned_at.getTime() + p.grace_seconds * 1000 > now.getTime()) return false;
        const n = (await confirmations(trx, [id])).get(id) ?? 0;
        if (p.quorum !== null && n < p.quorum) return false;
        await trx.updateTable('legacy_plans').set({ status: 'released', released_at: now }).where('id', '=', id).execute();
        return chain(trx, id, await appendEvent(trx, p, 'released', now, { confirmations: n, quorum: p.quorum }));
      });
      if (moved) released++;
    }
    return { warned, released };
  }
}
