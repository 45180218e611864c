import type { KeyPrincipal } from '../../http/auth-types.ts';
import { compileAssertion, newAjv, parseJsonAnswer, type AssertionOutcome, type AssertionSpec, type Checker, type Grade, type Graded } from './assertions.ts';
import { chatUnderKey, failureOf, isCallerRefusal, outputBound, type ModelCallDeps } from './model-call.ts';
import { VARIABLE_REF, type CaseIn } from './schemas.ts';

/** Case calls in flight at once for one run. */
const CONCURRENCY = 4;
/** A grader's answer is short: a JSON object with a score and one sentence (fewer where the grader's model produces fewer). */
const GRADER_MAX_TOKENS = 400;

export interface SuiteDefinition {
  model: string;
  graderModel: string;
  maxTokens: number | null;
  temperature: number | null;
  cases: CaseIn[];
}

export interface AttemptOutcome {
  passed: boolean;
  score: number;
  latency_ms: number | null;
  cost_micro_usd: number;
  receipt_id: string | null;
  error: { type: string; message: string } | null;
  output?: string;
  assertions: AssertionOutcome[];
}

export interface CaseOutcome {
  case: number;
  name: string | null;
  passed: boolean;
  pass_rate: number;
  attempts: AttemptOutcome[];
}

const fill = (text: string, vars: Record<string, string>) => text.replace(VARIABLE_REF, (m, name: string) => (Object.hasOwn(vars, name) ? vars[name]! : m));

/** An assertion with its case's variables filled into its string value. */
function filled(a: CaseIn['assertions'][number], vars: Record<string, string>): AssertionSpec {
  if (a.type === 'equals' || a.type === 'contains' || a.type === 'icontains' || a.type === 'llm_rubric') return { ...a, value: fill(a.value, vars) };
  return a as AssertionSpec;
}

export const GRADER_SYSTEM =
  'You grade an AI model\'s answer against a rubric. Reply with only a JSON object, no other text: ' +
  '{"score": <a number from 0 to 1: how fully the answer meets the rubric>, "reason": "<one sentence>"}.';

/** The grader's answer read: a JSON object with a score from 0 to 1 (or a boolean `pass`, read as 1 or 0). */
export function readGrade(text: string): { score: number; reason: string } | string {
  const parsed = parseJsonAnswer(text);
  if (!parsed || typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value)) return 'the grader did not answer with a JSON object';
  const v = parsed.value as { score?: unknown; pass?: unknown; reason?: unknown };
  const score = typeof v.score === 'number' ? v.score : typeof v.pass === 'boolean' ? (v.pass ? 1 : 0) : NaN;
  if (!Number.isFinite(score) || score < 0 || score > 1) return 'the grader gave no score from 0 to 1';
  return { score, reason: typeof v.reason === 'string' ? v.reason.slice(0, 2000) : '' };
}

/**
 * Runs a suite's cases, each `repeat` times, under a key: every attempt is a metered call of its own
 * (nothing is cached), and every llm_rubric assertion a metered grader call. A call that fails fails its
 * attempt (with the error's type and message); a refusal of the caller's key, credit or bounds (402, 401,
 * 403) stops the run and is thrown, after the calls in flight end.
 */
export async function runCases(d: ModelCallDeps, p: KeyPrincipal, s: SuiteDefinition, repeat: number, route: string, signal?: AbortSignal): Promise<CaseOutcome[]> {
  const ajv = newAjv();
  const checkers: Checker[][] = s.cases.map((c) => c.assertions.map((a) => compileAssertion(filled(a, c.variables ?? {}), ajv, s.graderModel)));
  let stop: unknown = null;

  const grade: Grade = async (rubric, output, graderModel): Promise<Graded> => {
    // Within the grader model's own output bound, as judge jurors are: asking past it would fail every grading.
    const maxTokens = await outputBound(d, graderModel, GRADER_MAX_TOKENS).catch(() => GRADER_MAX_TOKENS); // an unknown model fails in the call below
    const body = {
      model: graderModel,
      messages: [
        { role: 'system', content: GRADER_SYSTEM },
        { role: 'user', content: `Rubric:\n${rubric}\n\nAnswer to grade:\n${output}` },
      ],
      max_tokens: maxTokens,
      temperature: 0,
    };
    try {
      const a = await chatUnderKey(d, p, body, { route, checkChatRoute: true, signal });
      const g = readGrade(a.text);
      if (typeof g === 'string') return { failure: g, model: graderModel, receiptId: a.requestId, costMicroUsd: a.costMicroUsd };
      return { ...g, model: graderModel, receiptId: a.requestId, costMicroUsd: a.costMicroUsd };
    } catch (e) {
      if (isCallerRefusal(e)) throw e;
      return { failure: `${failureOf(e).type}: ${failureOf(e).message}`, model: graderModel, receiptId: null, costMicroUsd: 0 };
    }
  };

  const attempt = async (i: number): Promise<AttemptOutcome> => {
    const c = s.cases[i]!;
    const vars = c.variables ?? {};
    const body: Record<string, unknown> = { model: s.model, messages: c.messages.map((m) => ({ role: m.role, content: fill(m.content, vars) })) };
    if (s.maxTokens !== null) body.max_tokens = s.maxTokens;
    if (s.temperature !== null) body.temperature = s.temperature;
    let answer;
    try {
      answer = await chatUnderKey(d, p, body, { route, checkChatRoute: true, signal });
    } catch (e) {
      if (isCallerRefusal(e)) throw e;
      return { passed: false, score: 0, latency_ms: null, cost_micro_usd: 0, receipt_id: null, error: failureOf(e), assertions: [] };
    }
    const seen = { output: answer.text, latencyMs: answer.latencyMs, costMicroUsd: answer.costMicroUsd };
    const assertions: AssertionOutcome[] = [];
    for (const check of checkers[i]!) assertions.push(await check(seen, grade));
    const total = assertions.reduce((n, a) => n + a.weight, 0);
    const score = total > 0 ? assertions.reduce((n, a) => n + (a.passed ? a.weight : 0), 0) / total : 0;
    const passed = score >= (c.threshold ?? 1) - 1e-9;
    const cost = answer.costMicroUsd + assertions.reduce((n, a) => n + (a.grader?.cost_micro_usd ?? 0), 0);
    return { passed, score, latency_ms: answer.latencyMs, cost_micro_usd: cost, receipt_id: answer.requestId, error: null, output: answer.text, assertions };
  };

  const work = s.cases.flatMap((_, i) => Array.from({ length: repeat }, (_x, r) => ({ i, r })));
  const out: AttemptOutcome[][] = s.cases.map(() => []);
  let next = 0;
  const worker = async () => {
    while (stop === null && next < work.length) {
      const w = work[next++]!;
      try {
        out[w.i]![w.r] = await attempt(w.i);
      } catch (e) {
        stop ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, work.length) }, worker));
  if (stop !== null) throw stop;
  return s.cases.map((c, i) => {
    const attempts = out[i]!;
    const passed = attempts.filter((a) => a.passed).length;
    return { case: i, name: c.name ?? null, passed: passed === attempts.length, pass_rate: attempts.length ? passed / attempts.length : 0, attempts };
  });
}
