import { Cron } from 'croner';
import { ServiceError, invalid } from '@svc/shared';
import type { AgentsDeps } from './deps.ts';
import type { AgentRunner } from './runner.ts';
import { agentById, dueAgents, takeDue, type AgentRow } from './store.ts';

/** The shortest time between two scheduled runs an agent's schedule may ask for. */
export const MIN_SCHEDULE_INTERVAL_SECONDS = 60;
/** How many coming runs of a schedule are checked against the minimum interval. */
const CHECKED_RUNS = 12;
/** Due agents one pass of the leader's loop queues at most (the rest on the next pass). */
const PER_PASS = 50;

const cron = (expr: string) => new Cron(expr, { timezone: 'Etc/UTC', paused: true });

/**
 * A schedule's next run after `now`, after checking it: a cron expression (5 fields, or 6 with seconds; UTC;
 * `@hourly` and the like) that fires again, never twice within MIN_SCHEDULE_INTERVAL_SECONDS. A refusal is a
 * 400 naming `schedule`.
 */
export function checkSchedule(expr: string, now: Date): Date {
  let c: Cron;
  try {
    c = cron(expr);
  } catch (e) {
    throw invalid(`schedule: not a cron expression (${(e as Error).message})`, 'schedule');
  }
  const runs = c.nextRuns(CHECKED_RUNS, now);
  if (runs.length === 0) throw invalid('schedule: this expression never fires after now', 'schedule');
  for (let i = 1; i < runs.length; i++) {
    const gap = (runs[i]!.getTime() - runs[i - 1]!.getTime()) / 1000;
    if (gap < MIN_SCHEDULE_INTERVAL_SECONDS) {
      throw invalid(`schedule: fires ${gap} s apart; an agent runs at most once every ${MIN_SCHEDULE_INTERVAL_SECONDS} s`, 'schedule');
    }
  }
  return runs[0]!;
}

/** The run after `now` of a schedule that was checked when it was set (null if it never fires again). */
export function nextRunOf(expr: string, now: Date): Date | null {
  return cron(expr).nextRun(now);
}

/**
 * Scheduled runs, on the leader's loop: an enabled agent whose next_run_at has come gets one queued run and
 * its next_run_at moved to the schedule's next time after now, in one transaction under the agent's row lock:
 * a process that dies (or fails) anywhere in it leaves the run due, so it is taken on the next pass, by this
 * process or the next leader, and never taken twice. A run due while no leader ran is so queued once, however
 * many ticks were missed. A run its agent cannot take now (hourly limit, key cap) is recorded as refused, with
 * the reason.
 */
export class AgentScheduler {
  constructor(
    private readonly d: AgentsDeps,
    private readonly runner: AgentRunner,
  ) {}

  async runDue(): Promise<number> {
    const now = this.d.clock.now();
    let queued = 0;
    for (const a of await dueAgents(this.d.db, now, PER_PASS)) {
      try {
        if (await this.takeAndQueue(a, now)) queued++;
      } catch (err) {
        this.d.log.warn({ err, agent_id: a.id }, 'scheduled agent run not queued; still due, taken on the next pass');
      }
    }
    return queued;
  }

  /** Takes the due run and queues it (or records its refusal), all or nothing; false when another pass took it. */
  private takeAndQueue(due: AgentRow, now: Date): Promise<boolean> {
    const next = due.schedule ? nextRunOf(due.schedule, now) : null;
    return this.d.db.transaction().execute(async (trx) => {
      const a = await agentById(trx, due.id, true);
      if (!a || !a.enabled || !(await takeDue(trx, due, next, now))) return false;
      await this.d.stepFault?.('agents.schedule_taken', a.id);
      try {
        await this.runner.admit(trx, a, { reserveCap: true });
      } catch (e) {
        if (!(e instanceof ServiceError)) throw e;
        await this.refused(trx, a, e);
        return true;
      }
      await this.runner.queue(trx, a, 'schedule', '');
      return true;
    });
  }
  private async refused(trx: Parameters<AgentRunner['queue']>[0], a: AgentRow, e: ServiceError): Promise<void> {
    const run = await this.runner.queue(trx, a, 'schedule', '');
    const now = this.d.clock.now();
    await trx
      .updateTable('agent_runs')
      .set({ status: 'refused', error_type: e.type, error_message: e.message.slice(0, 500), ended_at: now })
      .where('id', '=', run.id)
      .execute();
    await trx.updateTable('agents').set({ last_run_status: 'refused' }).where('id', '=', a.id).execute();
  }
}
