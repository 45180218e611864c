import type { Insertable, Kysely } from 'kysely';
import { ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { EvalRunsTable } from '../../db/schema-quality.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { KeysService } from '../keys/service.ts';
import { inferenceKeyOf } from '../keys/inference-key.ts';
import type { ModelCallDeps } from './model-call.ts';
import { runCases, type AttemptOutcome, type CaseOutcome } from './runner.ts';
import { EVALS_CAP, RUNS_CAP, type CaseIn, type EvalInput } from './schemas.ts';
import { rates } from './stats.ts';
import { countSuites, deleteSuite, insertRun, insertSuite, lastRun, lastRuns, listRuns, listSuites, lockAccount, ownedSuite, type RunRow, type SuiteRow } from './store.ts';

export interface EvalsDeps {
  db: Kysely<DB>;
  clock: Clock;
  keys: KeysService;
  calls: ModelCallDeps;
}

/** The route the case and grader calls of a run are recorded under (usage events and receipts). */
export const RUN_ROUTE = 'POST /v1/evals/:id/run';

export const suiteNotFound = () => notFound('Eval suite');

/** A finished run: the row to store (content-free) and the per-case results with outputs, returned once. */
export interface ExecutedRun {
  row: Insertable<EvalRunsTable> & { id: string };
  results: CaseOutcome[];
}

/** What a stored run keeps of an attempt: no output, no grader reasoning. */
const stored = (a: AttemptOutcome): AttemptOutcome => ({ ...a, output: undefined, assertions: a.assertions.map(({ grader_reason: _, ...rest }) => rest) });

/**
 * Eval suites and their runs. A run calls the suite's model once per case and attempt through the metered
 * inference path under an API key of the account (the run's `key_id`, else the suite's designated key): each
 * call is held, settled and receipted like any chat completion of that key, and checked against its case's
 * assertions. Runs are stored content-free; outputs and grader reasons are returned once, by the run.
 */
export class EvalsService {
  constructor(private readonly d: EvalsDeps) {}

  /** Refuses (400 naming `param`) a model that is not a chat model of the catalog. */
  private async chatModel(model: string, param: string): Promise<void> {
    try {
      await this.d.calls.inference.catalog.resolve(model, 'chat');
    } catch (e) {
      if (e instanceof ServiceError && (e.type === 'not_found' || e.type === 'invalid_request')) throw invalid(`${param}: ${e.message}`, param);
      throw e;
    }
  }

  /** The principal of an API key of the account that runs calls (keys/inference-key.ts). */
  keyFor(accountId: string, keyId: string, param: string): Promise<KeyPrincipal> {
    return inferenceKeyOf(this.d.keys, accountId, keyId, param);
  }

  async create(accountId: string, input: EvalInput) {
    await this.chatModel(input.model, 'model');
    if (input.grader_model) await this.chatModel(input.grader_model, 'grader_model');
    for (const [i, c] of input.cases.entries()) {
      for (const [j, a] of c.assertions.entries()) if (a.type === 'llm_rubric' && a.grader_model) await this.chatModel(a.grader_model, `cases[${i}].assertions[${j}].grader_model`);
    }
    if (input.key_id) await this.keyFor(accountId, input.key_id, 'key_id');
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId, 'evals');
      const n = await countSuites(trx, accountId);
      if (n >= EVALS_CAP) throw new ServiceError('conflict', `An account holds at most ${EVALS_CAP} eval suites and this one holds ${n}; delete one first`, { reason: 'eval_limit', limit: EVALS_CAP });
      return insertSuite(trx, {
        id: newId('eval_'),
        account_id: accountId,
        name: input.name,
        model: input.model,
        key_id: input.key_id ?? null,
        grader_model: input.grader_model ?? null,
        max_tokens: input.max_tokens ?? null,
        temperature: input.temperature ?? null,
        cases: JSON.stringify(input.cases),
        created_at: now,
      });
    });
    return this.view(row, undefined);
  }

  async list(accountId: string) {
    const rows = await listSuites(this.d.db, accountId, EVALS_CAP);
    const last = await lastRuns(this.d.db, rows.map((r) => r.id));
    return { evals: rows.map((r) => this.view(r, last.get(r.id))) };
  }

  async remove(accountId: string, id: string) {
    const monitors = await deleteSuite(this.d.db, accountId, id);
    if (monitors === null) throw suiteNotFound();
    return { id, object: 'eval' as const, deleted: true as const, monitors_deleted: monitors };
  }

  async suite(accountId: string, id: string): Promise<SuiteRow> {
    const s = await ownedSuite(this.d.db, accountId, id);
    if (!s) throw suiteNotFound();
    return s;
  }

  /** Runs a suite now (a session's POST /v1/evals/:id/run) and records the run; outputs are in the answer only. */
  async run(accountId: string, id: string, opts: { keyId?: string; repeat: number }) {
    const suite = await this.suite(accountId, id);
    const keyId = opts.keyId ?? suite.key_id;
    if (!keyId) throw invalid('key_id: name the API key whose calls the run is metered under (the suite has no designated key)', 'key_id');
    const p = await this.keyFor(accountId, keyId, opts.keyId ? 'key_id' : 'eval.key_id');
    const run = await this.execute(suite, p, opts.repeat, 'manual', null);
    const saved = await this.d.db.transaction().execute((trx) => insertRun(trx, run.row, RUNS_CAP));
    if (!saved) throw suiteNotFound();
    return this.runView(run.row, run.results);
  }

  /** Runs the suite's cases under `p` and measures the run against the suite's newest run before it; stores nothing. */
  async execute(suite: SuiteRow, p: KeyPrincipal, repeat: number, trigger: 'manual' | 'monitor', monitorId: string | null): Promise<ExecutedRun> {
    const started = this.d.clock.now();
    const cases = suite.cases as CaseIn[];
    const results = await runCases(
      this.d.calls,
      p,
      { model: suite.model, graderModel: suite.grader_model ?? suite.model, maxTokens: suite.max_tokens, temperature: suite.temperature, cases },
      repeat,
      RUN_ROUTE,
    );
    const finished = this.d.clock.now();
    const r = rates(results.map((c) => c.attempts.map((a) => a.passed)));
    const previous = await lastRun(this.d.db, suite.id);
    const before = new Map(((previous?.results ?? []) as Array<{ case: number; passed: boolean }>).map((c) => [c.case, c.passed]));
    const regressed = previous ? results.filter((c) => before.get(c.case) === true && !c.passed).map((c) => c.case) : [];
    const row: ExecutedRun['row'] = {
      id: newId('evrun_'),
      eval_id: suite.id,
      account_id: suite.account_id,
      trigger,
      monitor_id: monitorId,
      key_id: p.keyId,
      model: suite.model,
      repeat,
      case_count: cases.length,
      ...r,
      regression: previous !== undefined && (r.pass_rate < previous.pass_rate - 1e-12 || regressed.length > 0),
      regressed_cases: JSON.stringify(regressed),
      previous_run_id: previous?.id ?? null,
      previous_pass_rate: previous?.pass_rate ?? null,
      cost_micro_usd: results.reduce((n, c) => n + c.attempts.reduce((m, a) => m + a.cost_micro_usd, 0), 0),
      results: JSON.stringify(results.map((c) => ({ ...c, attempts: c.attempts.map(stored) }))),
      started_at: started,
      finished_at: finished,
    };
    return { row, results };
  }

  async runs(accountId: string, id: string) {
    await this.suite(accountId, id);
    const rows = await listRuns(this.d.db, id, RUNS_CAP);
    return { runs: rows.map((r) => this.runView(r, r.results as CaseOutcome[])) };
  }

  runView(r: RunRow | ExecutedRun['row'], results: CaseOutcome[]) {
    const list = (v: unknown): number[] => (typeof v === 'string' ? (JSON.parse(v) as number[]) : (v as number[]));
    const iso = (d: Date | string) => (d instanceof Date ? d.toISOString() : new Date(d).toISOString());
    return {
      id: r.id,
      object: 'eval_run' as const,
      eval_id: r.eval_id,
      trigger: r.trigger,
      monitor_id: r.monitor_id ?? null,
      key_id: r.key_id,
      model: r.model,
      repeat: r.repeat,
      cases: r.case_count,
      attempts: r.attempts,
      passed_attempts: r.passed_attempts,
      pass_rate: r.pass_rate,
      pass_at_n: r.pass_at_n,
      pass_hat_n: r.pass_hat_n,
      wilson_lower: r.wilson_lower,
      regression: r.regression,
      regressed_cases: list(r.regressed_cases),
      previous_run_id: r.previous_run_id ?? null,
      previous_pass_rate: r.previous_pass_rate ?? null,
      cost_micro_usd: r.cost_micro_usd,
      started_at: iso(r.started_at),
      finished_at: iso(r.finished_at),
      results,
    };
  }

  private view(s: SuiteRow, last: RunRow | undefined) {
    const cases = s.cases as Array<Record<string, unknown>>;
    return {
      id: s.id,
      object: 'eval' as const,
      name: s.name,
      model: s.model,
      key_id: s.key_id,
      grader_model: s.grader_model,
      max_tokens: s.max_tokens,
      temperature: s.temperature,
      cases,
      case_count: cases.length,
      created_at: s.created_at.toISOString(),
      last_run: last ? { id: last.id, pass_rate: last.pass_rate, regression: last.regression, finished_at: last.finished_at.toISOString() } : null,
    };
  }
}
