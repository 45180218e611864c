import type { Kysely } from 'kysely';
import { PREFIX, SANDBOX_JOBS, ServiceError, newId, randomId, type Language, type SignedReceipt } from '@svc/shared';
import type { AgentTrigger, DB } from '../../db/schema.ts';
import type { RunResult } from '../sandboxes/schemas.ts';
import type { AgentsDeps } from './deps.ts';
import { agentById, agentOf, type AgentRow } from './store.ts';
import { claimQueued, failInterrupted, finishRun, insertRun, pendingRuns, runsSince, type RunRow } from './store-runs.ts';

const HOUR_MS = 3600_000;
/** Queued runs one process executes at once. */
const PARALLEL = 4;
/** A claim lasts the longest time limit plus this margin; a run still `running` after it was interrupted. */
const CLAIM_MARGIN_S = 120;

/** Refusals of the money path and the key: the run is `refused` (its program never ran). */
const REFUSALS = new Set(['spend_cap_reached', 'insufficient_credit', 'circuit_breaker_tripped', 'invalid_credential', 'account_suspended', 'agent_disabled']);

/** What a run's usage event and receipt name as its route, by trigger. */
const RUN_ROUTE: Record<AgentTrigger, string> = {
  manual: 'POST /v1/agents/:id/trigger',
  hook: 'POST /v1/agents/:id/hooks/:token',
  mailbox: 'POST /v1/agents/:id/messages',
  schedule: 'agents.schedule',
};

export const codeAad = (agentId: string) => `agents.code:${agentId}`;
export const keyAad = (agentId: string) => `agents.key:${agentId}`;
const inputAad = (runId: string) => `agent_runs.input:${runId}`;

type RunRef = Pick<RunRow, 'id' | 'request_id' | 'trigger'>;

/**
 * Runs of hosted agents. A run is admitted under a row lock on its agent (enabled, `max_runs_per_hour` counted
 * over the last hour, and for queued runs the agent key's cap reserved for every run not yet ended), then
 * executed as a sandbox run under the agent's key through the sandboxes module's executor: held, dispatched,
 * settled and receipted as any sandbox run, with SVC_INPUT, SVC_AGENT_ID, SVC_RUN_ID, SVC_TRIGGER,
 * SVC_API_KEY and SVC_GATEWAY_URL in its environment. The run row keeps metadata only: trigger, status, cost,
 * exit code, duration and the signed receipt, never input or output (a queued run's input is sealed in its row
 * until a worker claims it).
 */
export class AgentRunner {
  private draining: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(private readonly d: AgentsDeps) {}

  /** The most one run of the agent can be held for: its whole time limit at the sandbox price. */
  maxHold(a: Pick<AgentRow, 'timeout_seconds'>): number {
    return this.d.executor.costOf(a.timeout_seconds * 1000 + 5000);
  }

  /**
   * Whether the agent (locked by the caller's transaction) takes another run now: enabled, under its hourly
   * limit (429 with retry_after), and with `reserveCap` its key's cap covering every run not yet ended plus
   * this one at their largest holds (402 spend_cap_reached). Writes nothing.
   */
  async admit(trx: Kysely<DB>, a: AgentRow, opts: { reserveCap: boolean }): Promise<void> {
    if (!a.enabled) throw new ServiceError('conflict', `Agent ${a.id} is disabled; enable it with POST /v1/agents/${a.id}/gate`, { reason: 'agent_disabled' });
    const now = this.d.clock.now();
    const w = await runsSince(trx, a.id, new Date(now.getTime() - HOUR_MS));
    if (w.n >= a.max_runs_per_hour) {
      const retry = Math.max(1, Math.ceil(((w.oldest?.getTime() ?? now.getTime()) + HOUR_MS - now.getTime()) / 1000));
      throw new ServiceError('rate_limited', `Agent ${a.id} runs at most ${a.max_runs_per_hour} times per hour and has run ${w.n} times in the last hour; retry in ${retry} s`, {
        reason: 'max_runs_per_hour',
        limit: a.max_runs_per_hour,
        retry_after: retry,
      });
    }
    if (!opts.reserveCap) return;
    const key = await this.d.keys.get(a.account_id, a.key_id, trx);
    if (key.spend_cap_micro_usd === null) return;
    const pending = await pendingRuns(trx, a.id);
    const need = key.subtree_spent_micro_usd + (pending + 1) * this.maxHold(a);
    if (need > key.spend_cap_micro_usd) {
      throw new ServiceError(
        'spend_cap_reached',
        `The agent key's spend cap (${key.spend_cap_micro_usd} micro-USD, ${key.subtree_spent_micro_usd} spent) does not cover another run at up to ${this.maxHold(a)} micro-USD beside the ${pending} not yet ended`,
        { key_id: a.key_id },
      );
    }
  }

  /** A queued run of the agent (admitted by the caller, inside its transaction); its input sealed until claimed. */
  async queue(trx: Kysely<DB>, a: AgentRow, trigger: AgentTrigger, input: string): Promise<RunRow> {
    const id = newId('arun_');
    return insertRun(trx, {
      ...this.blank(a, id, trigger),
      status: 'queued',
      input_sealed: input ? this.d.sealer.seal(input, inputAad(id)) : null,
      input_bytes: Buffer.byteLength(input),
    });
  }

  /**
   * Runs the agent now (manual trigger): admitted, recorded as running, executed; answers the sandbox's whole
   * result once (output is never stored). Refusals reach the caller (and the run records them).
   */
  async runNow(accountId: string, agentId: string, input: string): Promise<{ result: RunResult; receipt: SignedReceipt; run: RunRow }> {
    const now = this.d.clock.now();
    const { a, run } = await this.d.db.transaction().execute(async (trx) => {
      const a = await agentOf(trx, accountId, agentId, true);
      await this.admit(trx, a, { reserveCap: false }); // the hold itself enforces the cap, and the refusal is recorded on the run
      const id = newId('arun_');
      const run = await insertRun(trx, { ...this.blank(a, id, 'manual'), status: 'running', input_bytes: Buffer.byteLength(input), started_at: now, claimed_by: this.d.processId, claim_until: this.claimUntil(now) });
      return { a, run };
    });
    const out = await this.execute(a, run, input, true);
    return { ...out!, run };
  }

  /** Executes claimed or started runs; a refusal or failure is recorded on the run (and thrown with `rethrow`). */
  private async execute(a: AgentRow, run: RunRef, input: string, rethrow: boolean): Promise<{ result: RunResult; receipt: SignedReceipt } | null> {
    try {
      if (!a.enabled) throw new ServiceError('conflict', `Agent ${a.id} was disabled before this run started`, { reason: 'agent_disabled' });
      const principal = await this.d.keys.principalOf(a.key_id);
      const program = {
        language: a.language as Language,
        code: this.d.sealer.open(a.code_sealed, codeAad(a.id)).toString('utf8'),
        env: {
          SVC_INPUT: input,
          SVC_AGENT_ID: a.id,
          SVC_RUN_ID: run.id,
          SVC_TRIGGER: run.trigger,
          SVC_API_KEY: this.d.sealer.open(a.key_sealed, keyAad(a.id)).toString('utf8'),
          SVC_GATEWAY_URL: this.d.publicUrl.origin,
        },
        timeout_seconds: a.timeout_seconds,
      };
      const out = await this.d.executor.execute(
        principal,
        program,
        {
          kind: 'run',
          jobKind: SANDBOX_JOBS.run,
          payload: { ...this.d.executor.programPayload(program, a.timeout_seconds), files: [], network: a.network, limits: this.d.sandbox.limits },
          sessionId: null,
          network: a.network,
          detail: () => ({ agent_id: a.id, agent_run_id: run.id, trigger: run.trigger }),
        },
        { requestId: run.request_id, runId: null, resource: new URL(`/v1/agents/${a.id}`, this.d.publicUrl).toString(), route: RUN_ROUTE[run.trigger] },
      );
      const r = out.result;
      const rc = out.receipt;
      await finishRun(this.d.db, run.id, {
        status: r.status === 'succeeded' ? 'succeeded' : 'failed',
        error_type: r.status === 'timed_out' ? 'timed_out' : null,
        cost_micro_usd: r.cost_micro_usd,
        exit_code: r.exit_code,
        duration_ms: r.duration_ms,
        receipt_id: rc.payload.id,
        receipt_hash: rc.hash,
        receipt_signature: rc.signature,
        receipt_canonical: rc.canonical,
        ended_at: this.d.clock.now(),
      });
      return out;
    } catch (e) {
      const se = e instanceof ServiceError ? e : null;
      const type = se ? String(se.extra.reason === 'agent_disabled' ? 'agent_disabled' : se.type) : 'internal_error';
      if (!se) this.d.log.error({ err: e, agent_id: a.id, run_id: run.id }, 'agent run failed');
      await finishRun(this.d.db, run.id, { status: REFUSALS.has(type) ? 'refused' : 'failed', error_type: type, error_message: se ? se.message.slice(0, 500) : 'Internal error', ended_at: this.d.clock.now() }).catch(
        (err: unknown) => this.d.log.error({ err, run_id: run.id }, 'agent run outcome not recorded'),
      );
      if (rethrow) throw e;
      return null;
    }
  }

  /**
   * Executes queued runs until none is left: each claimed once across processes (skip locked), PARALLEL at a
   * time. A call while a drain is under way joins it (and makes it look again before it ends).
   */
  drain(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.draining) {
      this.again = true;
      return this.draining;
    }
    const run = async () => {
      try {
        do {
          this.again = false;
          while (!this.stopped && (await this.drainOnce()) > 0);
        } while (this.again && !this.stopped);
      } finally {
        this.draining = null;
      }
    };
    this.draining = run();
    return this.draining;
  }

  /** Starts a drain in the background (a hook queued a run on this process). */
  kick(): void {
    this.drain().catch((err: unknown) => this.d.log.error({ err }, 'agent run queue drain failed'));
  }

  private async drainOnce(): Promise<number> {
    const now = this.d.clock.now();
    const claimed = await claimQueued(this.d.db, this.d.processId, now, this.claimUntil(now), PARALLEL);
    await Promise.all(
      claimed.map(async (c) => {
        const a = await agentById(this.d.db, c.agent_id);
        if (!a) return; // deleted meanwhile: its runs went with it
        const input = c.input_sealed ? this.d.sealer.open(c.input_sealed, inputAad(c.id)).toString('utf8') : '';
        await this.execute(a, c, input, false);
      }),
    );
    return claimed.length;
  }

  /** Runs whose process died mid-run end as failed (interrupted); they never run twice. */
  async closeInterrupted(): Promise<number> {
    return failInterrupted(this.d.db, this.d.clock.now());
  }

  /** No more claims; waits for the runs under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.draining?.catch(() => undefined);
  }

  private claimUntil(now: Date): Date {
    return new Date(now.getTime() + (this.d.sandbox.maxTimeoutSeconds + CLAIM_MARGIN_S) * 1000);
  }

  private blank(a: AgentRow, id: string, trigger: AgentTrigger) {
    return {
      id,
      agent_id: a.id,
      account_id: a.account_id,
      trigger,
      input_sealed: null,
      input_bytes: 0,
      request_id: PREFIX.request + randomId(20),
      cost_micro_usd: null,
      exit_code: null,
      duration_ms: null,
      error_type: null,
      error_message: null,
      receipt_id: null,
      receipt_hash: null,
      receipt_signature: null,
      receipt_canonical: null,
      claimed_by: null,
      claim_until: null,
      created_at: this.d.clock.now(),
      started_at: null,
      ended_at: null,
    };
  }
}
