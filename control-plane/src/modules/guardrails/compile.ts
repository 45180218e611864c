import { blocklistDetector } from './blocklist.ts';
import { injectionDetector } from './injection.ts';
import { piiDetector, type PiiCategory } from './pii.ts';
import { DirectionPlan, type RuleEntry } from './scanner.ts';
import { secretsDetector, type SecretCategory } from './secrets.ts';
import type { Action, Detector } from './types.ts';

/** One detector of a rule set as stored (and as POST /v1/guardrails takes it). */
export type DetectorConfig =
  | { type: 'pii'; input?: Action; output?: Action; categories?: PiiCategory[] }
  | { type: 'secrets'; input?: Action; output?: Action; categories?: SecretCategory[] }
  | { type: 'prompt_injection'; input?: Action; output?: Action }
  | { type: 'blocklist'; input?: Action; output?: Action; terms?: string[]; patterns?: string[] };

export interface RuleSetConfig {
  id: string;
  detectors: DetectorConfig[];
}

/** Detectors by configuration: rule sets that configure a detector alike share one (and its compiled patterns). */
const built = new Map<string, Detector>();

function detectorOf(c: DetectorConfig): Detector {
  const key = JSON.stringify(c.type === 'pii' || c.type === 'secrets' ? [c.type, c.categories ?? null] : c.type === 'blocklist' ? [c.type, c.terms ?? [], c.patterns ?? []] : [c.type]);
  let d = built.get(key);
  if (!d) {
    if (c.type === 'pii') d = piiDetector(c.categories);
    else if (c.type === 'secrets') d = secretsDetector(c.categories);
    else if (c.type === 'prompt_injection') d = injectionDetector();
    else d = blocklistDetector(c.terms ?? [], c.patterns ?? []);
    if (built.size >= 2000) built.clear();
    built.set(key, d);
  }
  return d;
}

/** What a policy's rule sets do to each direction (null: nothing scans it). */
export interface CompiledRules {
  input: DirectionPlan | null;
  output: DirectionPlan | null;
}

export function compileRuleSets(sets: readonly RuleSetConfig[]): CompiledRules {
  const input: RuleEntry[] = [];
  const output: RuleEntry[] = [];
  for (const s of sets) {
    for (const c of s.detectors) {
      const rule = `${s.id}/${c.type}`;
      if (c.input) input.push({ rule, detector: detectorOf(c), action: c.input });
      if (c.output) output.push({ rule, detector: detectorOf(c), action: c.output });
    }
  }
  return { input: input.length ? new DirectionPlan(input) : null, output: output.length ? new DirectionPlan(output) : null };
}
