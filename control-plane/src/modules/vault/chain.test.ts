import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { GENESIS, chainHolds, eventHash, type ChainEvent } from './chain.ts';
import { rootOf } from './core.ts';

const A = 'vast_test';
function build(types: string[]): ChainEvent[] {
  const out: ChainEvent[] = [];
  let prev = GENESIS;
  types.forEach((type, i) => {
    const e = { seq: i + 1, type, at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), payload_sha256: `0x${createHash('sha256').update(type + i).digest('hex')}`, prev_hash: prev };
    const hash = eventHash(A, e);
    out.push({ ...e, hash });
    prev = hash;
  });
  return out;
}

describe('vault hash chain', () => {
  it('hashes the canonical JSON of the event fields in key order, asset id included', () => {
    const e = { seq: 1, type: 'asset_registered', at: '2026-01-01T00:00:00.000Z', payload_sha256: `0x${'11'.repeat(32)}`, prev_hash: GENESIS };
    const text = `{"asset_id":"${A}","at":"2026-01-01T00:00:00.000Z","payload_sha256":"0x${'11'.repeat(32)}","prev_hash":"${GENESIS}","seq":1,"type":"asset_registered"}`;
    expect(eventHash(A, e)).toBe(`0x${createHash('sha256').update(text).digest('hex')}`);
    expect(eventHash('vast_other', e)).not.toBe(eventHash(A, e));
  });

  it('holds for a chain built by the rule, and breaks when any event is changed, dropped or moved', () => {
    const c = build(['asset_registered', 'transfer', 'document_added', 'asset_closed']);
    expect(chainHolds(A, c)).toBe(true);
    expect(chainHolds(A, c.map((e, i) => (i === 1 ? { ...e, type: 'claim_settled' } : e)))).toBe(false);
    expect(chainHolds(A, c.map((e, i) => (i === 2 ? { ...e, payload_sha256: `0x${'00'.repeat(32)}` } : e)))).toBe(false);
    expect(chainHolds(A, [c[0]!, c[2]!, c[3]!])).toBe(false);
    expect(chainHolds(A, [c[1]!, c[0]!, c[2]!, c[3]!])).toBe(false);
    expect(chainHolds('vast_other', c)).toBe(false);
  });

  it("roots the ordered event hashes as RFC 6962 does: one leaf's root is SHA-256(0x00 || leaf)", () => {
    const [e] = build(['asset_registered']);
    const leaf = Buffer.from(e!.hash.slice(2), 'hex');
    expect(rootOf([e!.hash])).toBe(`0x${createHash('sha256').update(Buffer.concat([Buffer.from([0]), leaf])).digest('hex')}`);
    const c = build(['a', 'b', 'c']);
    expect(rootOf(c.map((x) => x.hash))).not.toBe(rootOf([c[1]!, c[0]!, c[2]!].map((x) => x.hash)));
  });
});
