import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { leafHash as leafOf, nodeHash } from '../anchors/merkle.ts';
import { compareLabels, encodeMember, orderMembers, orderedRoot, rootRecomputes, type Member } from './root.ts';

const leafHash = (m: Member) => leafOf(encodeMember(m));

const digest = (s: string) => createHash('sha256').update(s).digest('hex');
const h = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const m = (label: string, content = label): Member => ({ label, sha256: digest(content), byte_len: Buffer.byteLength(content) });

describe('source set root', () => {
  it('encodes a member as uint32 label length, label bytes, digest bytes, uint64 byte_len', () => {
    const x = { label: 'é', sha256: 'ab'.repeat(32), byte_len: 2 ** 40 + 7 };
    expect(encodeMember(x).toString('hex')).toBe(`00000002c3a9${'ab'.repeat(32)}0000010000000007`);
    expect(leafHash(x)).toEqual(h(Buffer.from([0]), encodeMember(x)));
  });

  it('pins the root of a small set (recomputed by hand outside this code; a change of algorithm needs a new ROOT_ALGORITHM)', () => {
    const set = [m('b.txt', 'bee'), m('a.txt', 'ay'), m('c/d.md', '')];
    expect(orderedRoot(set)).toBe('01160b1ca0481304410d4a62f8ba945bd44517946b1d2e0ba921accf096ab480');
  });

  it('is the leaf for one member; pairs left to right and carries an odd node up unchanged', () => {
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map((l) => m(l));
    const [la, lb, lc, ld, le] = [a, b, c, d, e].map((x) => leafHash(x!));
    expect(orderedRoot([a!])).toBe(la!.toString('hex'));
    expect(orderedRoot([a!, b!])).toBe(nodeHash(la!, lb!).toString('hex'));
    expect(orderedRoot([a!, b!, c!])).toBe(nodeHash(nodeHash(la!, lb!), lc!).toString('hex'));
    // RFC 6962 for five leaves: MTH(0..4) then the fifth leaf, not a duplicated one.
    expect(orderedRoot([a!, b!, c!, d!, e!])).toBe(nodeHash(nodeHash(nodeHash(la!, lb!), nodeHash(lc!, ld!)), le!).toString('hex'));
  });

  it('does not depend on the order members are given in', () => {
    const set = ['x', 'alpha', 'beta', 'gamma', 'delta', 'a'].map((l) => m(l));
    const root = orderedRoot(set);
    expect(orderedRoot([...set].reverse())).toBe(root);
    expect(orderedRoot([set[3]!, set[0]!, set[5]!, set[1]!, set[4]!, set[2]!])).toBe(root);
  });

  it('orders labels by UTF-8 bytes, not by UTF-16 code units', () => {
    const halfwidth = '\uFF61'; // EF BD A1 in UTF-8; code unit FF61
    const emoji = '\u{1F600}'; // F0 9F 98 80 in UTF-8; code units D83D DE00 (sorts first in JavaScript)
    expect([emoji, halfwidth].sort()).toEqual([emoji, halfwidth]);
    expect(compareLabels(halfwidth, emoji)).toBeLessThan(0);
    expect(orderMembers([m(emoji), m(halfwidth), m('a'), m('ab'), m('b')]).map((x) => x.label)).toEqual(['a', 'ab', 'b', halfwidth, emoji]);
  });

  it('changes with any field of any member', () => {
    const set = [m('a'), m('b'), m('c')];
    const root = orderedRoot(set);
    expect(rootRecomputes(set, root)).toBe(true);
    const altered: Member[][] = [
      [set[0]!, { ...set[1]!, byte_len: set[1]!.byte_len + 1 }, set[2]!],
      [set[0]!, { ...set[1]!, sha256: digest('other') }, set[2]!],
      [set[0]!, { ...set[1]!, label: 'bb' }, set[2]!],
      [set[0]!, set[1]!],
    ];
    for (const s of altered) {
      expect(orderedRoot(s)).not.toBe(root);
      expect(rootRecomputes(s, root)).toBe(false);
    }
  });

  it('refuses what has no root: no members, a repeated label, a digest not in lowercase hex, a bad byte_len', () => {
    expect(() => orderedRoot([])).toThrow(/at least one member/);
    expect(() => orderedRoot([m('a'), m('a', 'other')])).toThrow(/appears twice/);
    expect(() => orderedRoot([{ ...m('a'), sha256: digest('a').toUpperCase() }])).toThrow(/lowercase hex/);
    expect(() => orderedRoot([{ ...m('a'), byte_len: -1 }])).toThrow(/byte_len/);
    expect(() => orderedRoot([{ ...m('a'), byte_len: 1.5 }])).toThrow(/byte_len/);
    expect(rootRecomputes([], 'ab')).toBe(false);
  });
});
