import { describe, expect, it } from 'vitest';
import { withOutputLimit } from './output-limit.ts';

describe('withOutputLimit', () => {
  it('moves the caller bound into the field the upstream reads', () => {
    expect(withOutputLimit({ model: 'm', max_tokens: 7 }, 'max_completion_tokens')).toEqual({ model: 'm', max_completion_tokens: 7 });
    expect(withOutputLimit({ model: 'm', max_completion_tokens: 7 }, 'max_tokens')).toEqual({ model: 'm', max_tokens: 7 });
  });

  it('sends the bound the hold assumed (max_completion_tokens first) and drops the other field', () => {
    expect(withOutputLimit({ max_tokens: 50, max_completion_tokens: 7 }, 'max_tokens')).toEqual({ max_tokens: 7 });
    expect(withOutputLimit({ max_tokens: 7, max_completion_tokens: null }, 'max_tokens')).toEqual({ max_tokens: 7 });
    expect(withOutputLimit({ max_tokens: null, max_completion_tokens: 7 }, 'max_completion_tokens')).toEqual({ max_completion_tokens: 7 });
  });

  it('leaves a request without a bound, or already right, as it is', () => {
    const none = { model: 'm' };
    const nulls = { model: 'm', max_tokens: null };
    const right = { model: 'm', max_tokens: 3 };
    expect(withOutputLimit(none, 'max_tokens')).toBe(none);
    expect(withOutputLimit(nulls, 'max_completion_tokens')).toBe(nulls);
    expect(withOutputLimit(right, 'max_tokens')).toBe(right);
  });
});
