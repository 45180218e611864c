import { describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { hideLocalNames } from './backends.ts';
import type { ResolvedModel } from './catalog.ts';

const model = (id: string, localModels: Record<string, string>) => ({ id, provider: null, nodes: { localModels, price: {} } }) as unknown as ResolvedModel;
const hidden = (message: string, m: ResolvedModel) => hideLocalNames(new ServiceError('invalid_request', message, { upstream_status: 400 }), m);

describe('hideLocalNames', () => {
  it("replaces the nodes' local names with the public id, longest first, in one pass", () => {
    const m = model('llama3-8b', { n1: 'llama3:8b-instruct-q4', n2: 'llama3' });
    expect(hidden('model "llama3:8b-instruct-q4" not found; try llama3', m).message).toBe('model "llama3-8b" not found; try llama3-8b');
    expect(hidden('x', m).extra).toEqual({ upstream_status: 400 });
  });

  it('leaves a name that stands inside a longer word, and messages without one, as they are', () => {
    const m = model('phi-3-mini', { n1: 'phi' });
    expect(hidden('graphics memory is full for phi', m).message).toBe('graphics memory is full for phi-3-mini');
    const e = new ServiceError('upstream_error', 'nothing to hide');
    expect(hideLocalNames(e, m)).toBe(e);
  });

  it('takes names with regular-expression characters literally', () => {
    expect(hidden('no model a.b+c (or aXb+c)', model('pub', { n1: 'a.b+c' })).message).toBe('no model pub (or aXb+c)');
  });
});
