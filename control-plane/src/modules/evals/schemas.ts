import { z } from 'zod';
import { ASSERTION_TYPES, newAjv, regexProblem, schemaProblem } from './assertions.ts';

/** The most suites an account holds; the list is complete up to it (spec document 3). */
export const EVALS_CAP = 200;
/** The most drift monitors an account holds (spec document 3). */
export const MONITORS_CAP = 50;
/** The runs a suite keeps, newest first (spec document 3). */
export const RUNS_CAP = 100;
/** The drift monitor interval floor: hourly (spec document 3). */
export const MIN_INTERVAL_SECONDS = 3600;
export const MAX_INTERVAL_SECONDS = 30 * 86400;
export const MAX_REPEAT = 10;
export const MAX_CASES = 100;

const weight = z.number().min(0).max(100).default(1).describe('The weight of this assertion in its case score (default 1; 0: reported, not counted).');
const threshold = z.number().min(0).max(1).optional().describe('The score this assertion needs to pass: default 1 (0.5 for llm_rubric).');
const common = { weight, threshold };
const Text = z.string().min(1).max(10_000);

const Equals = z.strictObject({ type: z.literal('equals'), value: z.string().max(10_000).describe('The whole answer, compared after trimming both.'), ...common });
const Contains = z.strictObject({ type: z.literal('contains'), value: Text.describe('A substring of the answer (case-sensitive).'), ...common });
const IContains = z.strictObject({ type: z.literal('icontains'), value: Text.describe('A substring of the answer, ignoring case.'), ...common });
const Regex = z.strictObject({
  type: z.literal('regex'),
  value: z.string().min(1).max(1000).describe('An RE2 pattern (linear time: no backreferences, no lookaround), searched in the answer.'),
  flags: z.string().regex(/^(?!.*(.).*\1)[ims]{0,3}$/, 'may hold i, m and s, each at most once').optional(),
  ...common,
});
const IsJson = z.strictObject({ type: z.literal('is_json'), ...common }).describe('The answer parses as JSON (the whole answer, or one fenced block that is the whole answer).');
const JsonSchema = z.strictObject({
  type: z.literal('json_schema'),
  value: z.record(z.string(), z.unknown()).describe('A JSON Schema (draft-07, Ajv strict mode, standard formats, patterns run by RE2) the JSON answer must match; one that does not compile is refused.'),
  ...common,
});
const LatencyBelow = z.strictObject({ type: z.literal('latency_ms_below'), value: z.number().int().min(1).max(3_600_000).describe('Milliseconds, on the gateway clock, from the call to its settled answer.'), ...common });
const CostBelow = z.strictObject({ type: z.literal('cost_below'), value: z.number().int().min(1).max(1_000_000_000_000).describe('Micro-USD: the charge on the case call\'s receipt (graders not included).'), ...common });
const Rubric = z.strictObject({
  type: z.literal('llm_rubric'),
  value: z.string().min(1).max(4000).describe('The rubric a grader model scores the answer against, from 0 to 1.'),
  grader_model: z.string().min(1).max(256).optional().describe("The grader (a chat model of the catalog): the suite's grader_model, else its model, when omitted."),
  ...common,
});

export const AssertionIn = z
  .discriminatedUnion('type', [Equals, Contains, IContains, Regex, IsJson, JsonSchema, LatencyBelow, CostBelow, Rubric], {
    error: (iss) => (iss.code === 'invalid_union' ? `type must be one of ${ASSERTION_TYPES.join(', ')}` : undefined),
  })
  .describe(`One of ${ASSERTION_TYPES.join(', ')}.`);

const Message = z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string().max(32_768) });
const VariableName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'a variable name is a letter or _ then up to 63 letters, digits or _');

export const CaseIn = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  messages: z.array(Message).min(1).max(50).describe('The chat messages sent to the model; {{name}} is replaced by the variable of that name.'),
  variables: z.record(VariableName, z.string().max(10_000)).optional().describe('Values for {{name}} in the messages and in the string values of equals, contains, icontains and llm_rubric.'),
  threshold: z.number().min(0).max(1).optional().describe('The case score (weighted share of passing assertions) an attempt needs to pass; default 1: every counted assertion passes.'),
  assertions: z.array(AssertionIn).min(1).max(20),
});

/** `{{name}}` references in a text. */
export const VARIABLE_REF = /\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}/g;

export const EvalInput = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    model: z.string().min(1).max(256).describe('A chat model of the catalog (GET /v1/models).'),
    key_id: z.string().min(1).max(64).optional().describe('The designated API key of the account that runs the suite (needs the inference scope): runs and monitors that name no key use it.'),
    grader_model: z.string().min(1).max(256).optional().describe('The default grader of llm_rubric assertions; the suite model when omitted.'),
    max_tokens: z.number().int().min(1).max(100_000).optional().describe("Sent with each case; the model's bound when omitted."),
    temperature: z.number().min(0).max(2).optional(),
    cases: z.array(CaseIn).min(1, 'a suite needs at least one case').max(MAX_CASES),
  })
  .superRefine((s, ctx) => {
    const ajv = newAjv();
    s.cases.forEach((c, i) => {
      const vars = c.variables ?? {};
      const refs = (text: string, path: PropertyKey[]) => {
        for (const m of text.matchAll(VARIABLE_REF)) {
          if (!Object.hasOwn(vars, m[1]!)) ctx.addIssue({ code: 'custom', path: ['cases', i, ...path], message: `names the variable {{${m[1]}}}, which cases[${i}].variables does not define` });
        }
      };
      c.messages.forEach((m, j) => refs(m.content, ['messages', j, 'content']));
      if (c.assertions.every((a) => a.weight === 0)) ctx.addIssue({ code: 'custom', path: ['cases', i, 'assertions'], message: 'every assertion has weight 0: at least one must count' });
      c.assertions.forEach((a, j) => {
        const at = ['cases', i, 'assertions', j, 'value'];
        if (a.type === 'equals' || a.type === 'contains' || a.type === 'icontains' || a.type === 'llm_rubric') refs(a.value, ['assertions', j, 'value']);
        if (a.type === 'regex') {
          const problem = regexProblem(a.value, a.flags);
          if (problem) ctx.addIssue({ code: 'custom', path: at, message: `refused: ${problem}` });
        }
        if (a.type === 'json_schema') {
          const problem = schemaProblem(a.value, ajv);
          if (problem) ctx.addIssue({ code: 'custom', path: at, message: `refused: ${problem}` });
        }
      });
    });
  });
export type EvalInput = z.infer<typeof EvalInput>;
export type CaseIn = z.infer<typeof CaseIn>;

export const EvalParams = z.object({ id: z.string().min(1).max(64) });

export const RunQuery = z.strictObject({
  repeat: z.coerce.number().int().min(1).max(MAX_REPEAT).default(1).describe(`Run each case N times (1 to ${MAX_REPEAT}), each a call of its own (nothing is cached): the run reports pass@N and pass^N.`),
});

export const RunBody = z
  .strictObject({
    key_id: z.string().min(1).max(64).optional().describe("The API key of the account the case calls are metered under (needs the inference scope); the suite's designated key when omitted."),
  })
  .optional();

const AssertionResult = z.object({
  type: z.enum(ASSERTION_TYPES),
  passed: z.boolean(),
  score: z.number(),
  weight: z.number(),
  threshold: z.number(),
  reason: z.string().nullable().describe("The gateway's account of a failure; never model text."),
  grader_reason: z.string().optional().describe('llm_rubric: the grader\'s explanation. Only in the answer of the run that made it; never stored.'),
  grader: z.object({ model: z.string(), receipt_id: z.string().nullable(), cost_micro_usd: z.number() }).optional(),
});

const AttemptResult = z.object({
  passed: z.boolean(),
  score: z.number().describe('The weighted share of passing assertions.'),
  latency_ms: z.number().nullable(),
  cost_micro_usd: z.number().describe('The case call and its graders.'),
  receipt_id: z.string().nullable().describe('The signed receipt of the case call (GET /v1/receipts/:id).'),
  error: z.object({ type: z.string(), message: z.string() }).nullable().describe('The call failed: no answer to check, the attempt fails.'),
  output: z.string().optional().describe('The model\'s answer. Only in the answer of the run that made it; never stored.'),
  assertions: z.array(AssertionResult),
});

const CaseResult = z.object({
  case: z.number().int().describe('Index in the suite\'s cases.'),
  name: z.string().nullable(),
  passed: z.boolean().describe('Every attempt passed.'),
  pass_rate: z.number(),
  attempts: z.array(AttemptResult),
});

export const RunView = z.object({
  id: z.string(),
  object: z.literal('eval_run'),
  eval_id: z.string(),
  trigger: z.enum(['manual', 'monitor']),
  monitor_id: z.string().nullable(),
  key_id: z.string(),
  model: z.string(),
  repeat: z.number().int(),
  cases: z.number().int(),
  attempts: z.number().int(),
  passed_attempts: z.number().int(),
  pass_rate: z.number().describe('Passed attempts / attempts.'),
  pass_at_n: z.number().describe('pass@N: the share of cases with at least one passing attempt of N.'),
  pass_hat_n: z.number().describe('pass^N: the share of cases whose N attempts all passed.'),
  wilson_lower: z.number().describe('The lower bound of the 95% Wilson score interval of pass_rate over the attempts.'),
  regression: z.boolean().describe("Against the suite's previous run: a lower pass rate, or a case that passed there and fails here."),
  regressed_cases: z.array(z.number().int()),
  previous_run_id: z.string().nullable(),
  previous_pass_rate: z.number().nullable(),
  cost_micro_usd: z.number().int(),
  started_at: z.string(),
  finished_at: z.string(),
  results: z.array(CaseResult),
});

export const RunList = z.object({ runs: z.array(RunView).describe(`Newest first; a suite keeps its ${RUNS_CAP} newest runs. Content-free: no outputs or grader reasons.`) });

const LastRun = z.object({ id: z.string(), pass_rate: z.number(), regression: z.boolean(), finished_at: z.string() }).nullable();

export const EvalView = z.object({
  id: z.string(),
  object: z.literal('eval'),
  name: z.string(),
  model: z.string(),
  key_id: z.string().nullable(),
  grader_model: z.string().nullable(),
  max_tokens: z.number().int().nullable(),
  temperature: z.number().nullable(),
  cases: z.array(z.record(z.string(), z.unknown())).describe('As created (weights filled in).'),
  case_count: z.number().int(),
  created_at: z.string(),
  last_run: LastRun,
});

export const EvalList = z.object({ evals: z.array(EvalView).describe(`Newest first; complete (an account holds at most ${EVALS_CAP}).`) });

export const EvalDeleted = z.object({ id: z.string(), object: z.literal('eval'), deleted: z.literal(true), monitors_deleted: z.number().int() });

export const MonitorInput = z.strictObject({
  eval_id: z.string().min(1).max(64),
  interval_seconds: z
    .number()
    .int()
    .min(MIN_INTERVAL_SECONDS, `must be at least ${MIN_INTERVAL_SECONDS}: the drift monitor interval floor is hourly`)
    .max(MAX_INTERVAL_SECONDS)
    .default(MIN_INTERVAL_SECONDS)
    .describe('Seconds between runs: at least 3600 (hourly floor), at most 30 days; default 3600.'),
  threshold: z.number().min(0).max(1).default(0).describe('Drift when the measured rate falls under it (default 0: off).'),
  drop_tolerance: z.number().min(0).max(1).default(0.1).describe('Drift when the measured rate falls more than this below the baseline (default 0.1).'),
  repeat: z.number().int().min(1).max(MAX_REPEAT).default(1).describe('Attempts per case each run; above 1 the monitor measures the Wilson lower bound rather than the pass rate.'),
  key_id: z.string().min(1).max(64).optional().describe("The API key its runs are metered under; the suite's designated key when omitted."),
});
export type MonitorInput = z.infer<typeof MonitorInput>;

export const MonitorPatch = z
  .strictObject({
    paused: z.boolean().optional().describe('true pauses (no runs, next_run_at null); false resumes (due at once if its time passed while paused).'),
    interval_seconds: z.number().int().min(MIN_INTERVAL_SECONDS, `must be at least ${MIN_INTERVAL_SECONDS}: the drift monitor interval floor is hourly`).max(MAX_INTERVAL_SECONDS).optional(),
    threshold: z.number().min(0).max(1).optional(),
    drop_tolerance: z.number().min(0).max(1).optional(),
    reset_baseline: z.literal(true).optional().describe('Forget the baseline: the next run sets it.'),
  })
  .refine((p) => Object.keys(p).length > 0, 'name at least one of paused, interval_seconds, threshold, drop_tolerance, reset_baseline');
export type MonitorPatch = z.infer<typeof MonitorPatch>;

export const MonitorParams = z.object({ id: z.string().min(1).max(64) });

export const MonitorView = z.object({
  id: z.string(),
  object: z.literal('eval_monitor'),
  eval_id: z.string(),
  key_id: z.string(),
  state: z.enum(['active', 'paused']),
  interval_seconds: z.number().int(),
  threshold: z.number(),
  drop_tolerance: z.number(),
  repeat: z.number().int(),
  measure: z.enum(['pass_rate', 'wilson_lower']).describe('pass_rate with repeat 1; the Wilson lower bound of the pass rate when cases run more than once.'),
  baseline_rate: z.number().nullable().describe("The measured rate drops are taken from: the suite's newest run at creation when it ran with the same repeat, else the monitor's first run."),
  baseline_run_id: z.string().nullable(),
  last_run_id: z.string().nullable(),
  last_run_at: z.string().nullable(),
  last_pass_rate: z.number().nullable(),
  last_measured_rate: z.number().nullable(),
  last_error: z.string().nullable().describe('Why the last run could not run (a key revoked, credit exhausted), or null.'),
  failure_streak: z.number().int().describe('Consecutive runs that drifted or could not run.'),
  drifting: z.boolean().describe('The last measured run drifted (eval_drift_detected fired when it started to).'),
  next_run_at: z.string().nullable().describe('Null while paused.'),
  created_at: z.string(),
});

export const MonitorList = z.object({ monitors: z.array(MonitorView).describe(`Newest first; complete (an account holds at most ${MONITORS_CAP}).`) });
export const MonitorDeleted = z.object({ id: z.string(), object: z.literal('eval_monitor'), deleted: z.literal(true) });
