import { describe, expect, it } from 'vitest';
import { Successors } from './tokens.ts';

describe('refresh successors', () => {
  it('are derived from the presented token and the key: the same twice, different per token and key', () => {
    const a = new Successors(new Uint8Array(32).fill(1));
    const b = new Successors(new Uint8Array(32).fill(2));
    const t = 'ort-svc_presented';
    expect(a.of(t)).toEqual(a.of(t));
    expect(a.of(t).refresh).toMatch(/^ort-svc_[\w-]{43}$/);
    expect(a.of(t).access).toMatch(/^oat-svc_[\w-]{43}$/);
    expect(a.of(t).refresh).not.toBe(a.of(`${t}x`).refresh);
    expect(a.of(t).refresh).not.toBe(b.of(t).refresh);
  });
});
