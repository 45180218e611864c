import { describe, expect, it } from 'vitest';
import { ToolCallKeys } from './stream.ts';

describe('ToolCallKeys', () => {
  it('keys deltas by index as OpenAI sends them; continuation deltas without index or id continue the last call', () => {
    const k = new ToolCallKeys();
    expect([k.of({ index: 0, id: 'a' }), k.of({ index: 0 }), k.of({ index: 1, id: 'b' }), k.of({}), k.of({ index: 0 })]).toEqual(['i0', 'i0', 'i1', 'i1', 'i0']);
  });

  it('keys calls sent whole without an index by their id, and a later delta naming a known id continues that call', () => {
    const k = new ToolCallKeys();
    expect([k.of({ id: 'a' }), k.of({ id: 'b' }), k.of({}), k.of({ id: 'a' })]).toEqual(['id a', 'id b', 'id b', 'id a']);
    const m = new ToolCallKeys();
    expect([m.of({ index: 0, id: 'call_a' }), m.of({ id: 'call_a' }), m.of({ index: 1, id: 'call_b' }), m.of({ id: 'call_b' })]).toEqual(['i0', 'i0', 'i1', 'i1']);
  });
});
