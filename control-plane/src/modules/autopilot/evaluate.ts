import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { SuiteRow } from '../evals/store.ts';
import { chatUnderKey, failureOf, isCallerRefusal, type ModelCallDeps } from '../evals/model-call.ts';
import { runCases, type CaseOutcome } from '../evals/runner.ts';
import type { CaseIn } from '../evals/schemas.ts';
import { rates } from '../evals/stats.ts';
import { applyBuild } from '../engine/service.ts';
import { outputFingerprint } from '../replay/fingerprint.ts';
import type { Configuration } from './targets.ts';

/** The route the evaluation calls are recorded under (usage events and receipts). */
export const ANALYZE_ROUTE = 'POST /v1/autopilot/analyze';

export interface SuiteScore {
  model: string;
  pass_rate: number;
  passed_attempts: number;
  attempts: number;
  cost_micro_usd: number;
  /** Per case: did every attempt pass. */
  cases: boolean[];
}

/** A suite's cases as one configuration sends them: its system prompt first, its parameters over the suite's. */
export async function scoreSuite(calls: ModelCallDeps, p: KeyPrincipal, suite: SuiteRow, cfg: Configuration, repeat: number): Promise<SuiteScore> {
  const cases = (suite.cases as CaseIn[]).map((c) => (cfg.systemPrompt === null ? c : { ...c, messages: [{ role: 'system' as const, content: cfg.systemPrompt }, ...c.messages] }));
  const outcomes: CaseOutcome[] = await runCases(
    calls,
    p,
    { model: cfg.model, graderModel: suite.grader_model ?? suite.model, maxTokens: cfg.parameters.max_tokens ?? suite.max_tokens, temperature: cfg.parameters.temperature ?? suite.temperature, cases },
    repeat,
    ANALYZE_ROUTE,
  );
  const r = rates(outcomes.map((c) => c.attempts.map((a) => a.passed)));
  return {
    model: cfg.model,
    pass_rate: r.pass_rate,
    passed_attempts: r.passed_attempts,
    attempts: r.attempts,
    cost_micro_usd: outcomes.reduce((n, c) => n + c.attempts.reduce((m, a) => m + a.cost_micro_usd, 0), 0),
    cases: outcomes.map((c) => c.passed),
  };
}

/** Regression on a suite, as eval runs judge it: a lower pass rate, or a case that passed and now fails. */
export function suiteRegression(baseline: SuiteScore, candidate: SuiteScore): { regressed: number[]; regression: boolean } {
  const regressed = baseline.cases.flatMap((passed, i) => (passed && !candidate.cases[i] ? [i] : []));
  return { regressed, regression: candidate.pass_rate < baseline.pass_rate - 1e-12 || regressed.length > 0 };
}

/** A capsule's request as one configuration sends it. */
export function requestUnder(request: Record<string, unknown>, cfg: Configuration): Record<string, unknown> {
  const body = applyBuild(request, cfg.model, cfg.parameters);
  if (cfg.systemPrompt !== null) body.messages = [{ role: 'system', content: cfg.systemPrompt }, ...(Array.isArray(request.messages) ? request.messages : [])];
  return body;
}

/**
 * Whether a configuration's answer to a capsule's request has the capsule's baseline fingerprint, and what
 * the call cost. A call that fails (not a refusal of the key, which stops the analysis) matches nothing.
 */
export async function matchCapsule(calls: ModelCallDeps, p: KeyPrincipal, request: Record<string, unknown>, baseline: string, cfg: Configuration): Promise<{ matched: boolean; cost: number; failure?: { type: string; message: string } }> {
  try {
    const a = await chatUnderKey(calls, p, requestUnder(request, cfg), { route: ANALYZE_ROUTE, checkChatRoute: true });
    return { matched: outputFingerprint(a.body) === baseline, cost: a.costMicroUsd };
  } catch (e) {
    if (isCallerRefusal(e)) throw e;
    return { matched: false, cost: 0, failure: failureOf(e) };
  }
}
