import { ServiceError, canonicalize, sha256Hex } from '@svc/shared';

/** What a policy holds, normalised: guardrails and models sorted and unique; absent limits left out. */
export interface PolicyContent {
  v: 1;
  guardrails: string[];
  models?: string[];
  max_output_tokens?: number;
}

/** A policy as POST /v1/keys and /v1/keys/delegate take it (see schemas.ts). */
export interface PolicyInput {
  guardrails: string[];
  models?: string[] | undefined;
  max_output_tokens?: number | undefined;
}

const refuse = (message: string, param: string) => new ServiceError('invalid_request', message, { param });
const sortedUnique = (a: readonly string[]) => [...new Set(a)].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));

/** Whether model pattern `outer` (an id, or a prefix ending in `*`) admits every model `inner` admits. */
export function covers(outer: string, inner: string): boolean {
  if (!outer.endsWith('*')) return inner === outer;
  const prefix = outer.slice(0, -1);
  return (inner.endsWith('*') ? inner.slice(0, -1) : inner).startsWith(prefix);
}

/** Whether a model id is admitted by a list of patterns. */
export const admits = (patterns: readonly string[], model: string) => patterns.some((p) => covers(p, model));

/**
 * The content of a key's policy: the input as given, or, below a parent key that carries a policy, the
 * parent's with the input added: rule sets joined, models narrowed (each within the parent's), the output
 * limit lowered. Widening is refused (400 naming the field); `parentGuardrails` are the parent's live ones.
 */
export function contentOf(input: PolicyInput, parent: PolicyContent | null): PolicyContent {
  const guardrails = sortedUnique([...(parent?.guardrails ?? []), ...input.guardrails]);
  let models = input.models ? sortedUnique(input.models) : undefined;
  if (parent?.models) {
    if (models) {
      const i = input.models!.findIndex((m) => !parent.models!.some((p) => covers(p, m)));
      if (i >= 0) throw refuse(`policy.models[${i}]: "${input.models![i]}" is outside the parent key's policy models (${parent.models.join(', ')}); a delegated key may only narrow them`, `policy.models[${i}]`);
    } else models = parent.models;
  }
  let max = input.max_output_tokens;
  if (parent?.max_output_tokens !== undefined) {
    if (max !== undefined && max > parent.max_output_tokens) {
      throw refuse(`policy.max_output_tokens: must not exceed the parent key's policy limit (${parent.max_output_tokens}); a delegated key may only lower it`, 'policy.max_output_tokens');
    }
    max ??= parent.max_output_tokens;
  }
  const c: PolicyContent = { v: 1, guardrails };
  if (models) c.models = models;
  if (max !== undefined) c.max_output_tokens = max;
  if (!c.guardrails.length && !c.models && c.max_output_tokens === undefined) {
    throw refuse('policy: constrains nothing; name guardrails, models or max_output_tokens', 'policy');
  }
  return c;
}

/** The policy's RFC 8785 text and its sha256: what receipts are stamped with, recomputable by anyone. */
export function digestOf(c: PolicyContent): { canonical: string; sha256: string } {
  const canonical = canonicalize(c);
  return { canonical, sha256: sha256Hex(canonical) };
}

export const POLICY_PREFIX = 'pol_';

/** A policy's id: derived from the account, the content's sha256 and its generation (see PoliciesTable). */
export function policyId(accountId: string, sha256: string, generation: number): string {
  return POLICY_PREFIX + sha256Hex(`${accountId}\n${sha256}\n${generation}`).slice(0, 24);
}
