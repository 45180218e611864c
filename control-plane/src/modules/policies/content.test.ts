import { describe, expect, it } from 'vitest';
import { ServiceError, canonicalize, sha256Hex } from '@svc/shared';
import { admits, contentOf, covers, digestOf, policyId } from './content.ts';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as ServiceError).extra.param;
  }
  throw new Error('not refused');
};

describe('policy content', () => {
  it('is normalised, so the same policy in any order has one digest and one id per account', () => {
    const a = contentOf({ guardrails: ['gr_b', 'gr_a', 'gr_b'], models: ['m2', 'm1'] }, null);
    const b = contentOf({ guardrails: ['gr_a', 'gr_b'], models: ['m1', 'm2'] }, null);
    expect(a).toEqual({ v: 1, guardrails: ['gr_a', 'gr_b'], models: ['m1', 'm2'] });
    expect(digestOf(a)).toEqual(digestOf(b));
    expect(digestOf(a).sha256).toBe(sha256Hex(canonicalize({ guardrails: ['gr_a', 'gr_b'], models: ['m1', 'm2'], v: 1 })));
    expect(policyId('acct_1', digestOf(a).sha256, 0)).not.toBe(policyId('acct_2', digestOf(a).sha256, 0));
    expect(policyId('acct_1', digestOf(a).sha256, 0)).toMatch(/^pol_[0-9a-f]{24}$/);
  });

  it('matches models by id or by a prefix ending in *', () => {
    expect(covers('gpt-4o*', 'gpt-4o-mini')).toBe(true);
    expect(covers('gpt-4o*', 'gpt-4o-mini*')).toBe(true);
    expect(covers('gpt-4o-mini', 'gpt-4o*')).toBe(false);
    expect(admits(['a', 'b*'], 'bz')).toBe(true);
    expect(admits(['a', 'b*'], 'c')).toBe(false);
  });

  it("lets a delegated key only add to its parent's policy", () => {
    const parent = contentOf({ guardrails: ['gr_a'], models: ['test-*'], max_output_tokens: 100 }, null);
    expect(contentOf({ guardrails: ['gr_b'] }, parent)).toEqual({ v: 1, guardrails: ['gr_a', 'gr_b'], models: ['test-*'], max_output_tokens: 100 });
    expect(contentOf({ guardrails: [], models: ['test-chat'], max_output_tokens: 50 }, parent)).toEqual({ v: 1, guardrails: ['gr_a'], models: ['test-chat'], max_output_tokens: 50 });
    expect(refusal(() => contentOf({ guardrails: [], models: ['test-chat', 'other'] }, parent))).toBe('policy.models[1]');
    expect(refusal(() => contentOf({ guardrails: [], max_output_tokens: 101 }, parent))).toBe('policy.max_output_tokens');
    expect(refusal(() => contentOf({ guardrails: [] }, null))).toBe('policy');
  });
});
