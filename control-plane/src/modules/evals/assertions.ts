import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { linearRegex } from '../../linear-regex.ts';

/**
 * The assertion types of an eval case and how each scores one answer. Every type scores 0 or 1 except
 * llm_rubric, whose grader gives a score from 0 to 1; an assertion passes when its score reaches its
 * threshold (default 1, and 0.5 for llm_rubric). Patterns and schemas a caller supplies are compiled when
 * the suite is created (a pattern RE2 refuses, or a schema Ajv cannot compile, is refused then, naming the
 * field) and again for each run.
 */
export const ASSERTION_TYPES = ['equals', 'contains', 'icontains', 'regex', 'is_json', 'json_schema', 'latency_ms_below', 'cost_below', 'llm_rubric'] as const;
export type AssertionType = (typeof ASSERTION_TYPES)[number];

export type AssertionSpec =
  | { type: 'equals' | 'contains' | 'icontains'; value: string; weight: number; threshold?: number }
  | { type: 'regex'; value: string; flags?: string; weight: number; threshold?: number }
  | { type: 'is_json'; weight: number; threshold?: number }
  | { type: 'json_schema'; value: Record<string, unknown>; weight: number; threshold?: number }
  | { type: 'latency_ms_below' | 'cost_below'; value: number; weight: number; threshold?: number }
  | { type: 'llm_rubric'; value: string; grader_model?: string; weight: number; threshold?: number };

export const DEFAULT_RUBRIC_THRESHOLD = 0.5;

export const thresholdOf = (a: AssertionSpec): number => a.threshold ?? (a.type === 'llm_rubric' ? DEFAULT_RUBRIC_THRESHOLD : 1);

/** A regular expression run by RE2 (RE2JS, linear in the text): ajv's engine for `pattern` too, so a schema's patterns cannot backtrack. */
const re2Engine = Object.assign((pattern: string, flags: string) => linearRegex(pattern, flags), { code: 'linearRegex' });

// ajv-formats is CommonJS: its default export is the plugin function itself.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

/** A fresh validator compiler (one per suite compiled: ajv caches every schema it compiles for its lifetime). */
export function newAjv(): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: true, strictTypes: false, strictTuples: false, strictRequired: false, code: { regExp: re2Engine } });
  addFormats(ajv);
  return ajv;
}

/** Why a regex pattern is refused, or null when RE2 compiles it. */
export function regexProblem(pattern: string, flags = ''): string | null {
  try {
    linearRegex(pattern, flags);
    return null;
  } catch (e) {
    return `RE2 does not compile it (${(e as Error).message}); backreferences and lookaround are not supported`;
  }
}

/** Why a JSON Schema is refused, or null when it compiles (draft-07, strict mode, RE2 patterns, ajv-formats formats). */
export function schemaProblem(schema: unknown, ajv: Ajv = newAjv()): string | null {
  try {
    ajv.compile(schema as object);
    return null;
  } catch (e) {
    return `the JSON Schema does not compile: ${(e as Error).message}`;
  }
}

/**
 * An answer read as JSON: the whole text, trimmed, or the content of one fenced block that is the whole text
 * (```json ... ```), which models often add. Undefined when it does not parse.
 */
export function parseJsonAnswer(text: string): { value: unknown } | undefined {
  let s = text.trim();
  const fenced = /^```(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/i.exec(s);
  if (fenced) s = fenced[1]!.trim();
  if (!s) return undefined;
  try {
    return { value: JSON.parse(s) };
  } catch {
    return undefined;
  }
}

/** What one assertion made of one answer. `reason` is the gateway's words; a grader's reasoning goes in `grader_reason`. */
export interface AssertionOutcome {
  type: AssertionType;
  passed: boolean;
  score: number;
  weight: number;
  threshold: number;
  reason: string | null;
  /** llm_rubric: the grader's own explanation (returned by the run that made it, never stored). */
  grader_reason?: string;
  /** llm_rubric: the grader call's receipt id and cost. */
  grader?: { model: string; receipt_id: string | null; cost_micro_usd: number };
}

/** What a checker sees of one attempt. */
export interface Attempt {
  output: string;
  latencyMs: number;
  costMicroUsd: number;
}

/** A grader's verdict on a rubric; `failure` when it could not give one (its call failed or answered out of format). */
export type Graded = { score: number; reason: string; model: string; receiptId: string; costMicroUsd: number } | { failure: string; model: string; receiptId: string | null; costMicroUsd: number };

export type Grade = (rubric: string, output: string, graderModel: string) => Promise<Graded>;

/** An assertion ready to check answers (its pattern or schema compiled). */
export type Checker = (a: Attempt, grade: Grade) => Promise<AssertionOutcome>;

const outcome = (spec: AssertionSpec, score: number, reason: string | null): AssertionOutcome => {
  const threshold = thresholdOf(spec);
  return { type: spec.type, passed: score >= threshold, score, weight: spec.weight, threshold, reason };
};

/** The checker of one assertion; `graderDefault` is the suite's grader model. Throws on a pattern or schema that does not compile. */
export function compileAssertion(spec: AssertionSpec, ajv: Ajv, graderDefault: string): Checker {
  switch (spec.type) {
    case 'equals':
      return async (a) => (a.output.trim() === spec.value.trim() ? outcome(spec, 1, null) : outcome(spec, 0, 'the answer (trimmed) does not equal the value'));
    case 'contains':
      return async (a) => (a.output.includes(spec.value) ? outcome(spec, 1, null) : outcome(spec, 0, 'the answer does not contain the value'));
    case 'icontains': {
      const needle = spec.value.toLocaleLowerCase('en-US');
      return async (a) => (a.output.toLocaleLowerCase('en-US').includes(needle) ? outcome(spec, 1, null) : outcome(spec, 0, 'the answer does not contain the value (ignoring case)'));
    }
    case 'regex': {
      const re = linearRegex(spec.value, spec.flags ?? '');
      return async (a) => {
        return re.test(a.output) ? outcome(spec, 1, null) : outcome(spec, 0, 'the pattern does not match the answer');
      };
    }
    case 'is_json':
      return async (a) => (parseJsonAnswer(a.output) ? outcome(spec, 1, null) : outcome(spec, 0, 'the answer is not JSON'));
    case 'json_schema': {
      const validate: ValidateFunction = ajv.compile(spec.value);
      return async (a) => {
        const parsed = parseJsonAnswer(a.output);
        if (!parsed) return outcome(spec, 0, 'the answer is not JSON');
        if (validate(parsed.value)) return outcome(spec, 1, null);
        const e = validate.errors?.[0];
        return outcome(spec, 0, `the answer does not match the schema${e ? `: ${e.instancePath || '(root)'} ${e.message ?? ''}`.trimEnd() : ''}`);
      };
    }
    case 'latency_ms_below':
      return async (a) => (a.latencyMs < spec.value ? outcome(spec, 1, null) : outcome(spec, 0, `the answer took ${a.latencyMs} ms`));
    case 'cost_below':
      return async (a) => (a.costMicroUsd < spec.value ? outcome(spec, 1, null) : outcome(spec, 0, `the call cost ${a.costMicroUsd} micro-USD`));
    case 'llm_rubric': {
      const model = spec.grader_model ?? graderDefault;
      return async (a, grade) => {
        const g = await grade(spec.value, a.output, model);
        const grader = { model: g.model, receipt_id: g.receiptId, cost_micro_usd: g.costMicroUsd };
        if ('failure' in g) return { ...outcome(spec, 0, `the grader gave no grade: ${g.failure}`), grader };
        return { ...outcome(spec, g.score, null), grader_reason: g.reason, grader };
      };
    }
  }
}
