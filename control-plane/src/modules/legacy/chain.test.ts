import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { eventRecord, GENESIS, verifyChain } from './chain.ts';

const sha = (s: string) => `0x${createHash('sha256').update(s, 'utf8').digest('hex')}`;

describe('the legacy event chain', () => {
  it('hashes the RFC 8785 canonical record, linked to the previous hash', () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    const a = eventRecord('lgp_1', 0, 'created', at, { quorum: 2, beneficiaries: 1 }, GENESIS);
    expect(a.canonical).toBe(canonicalize({ v: 1, plan_id: 'lgp_1', seq: 0, type: 'created', at: at.toISOString(), data: { beneficiaries: 1, quorum: 2 }, prev_hash: GENESIS }));
    expect(a.hash).toBe(sha(a.canonical));
    const b = eventRecord('lgp_1', 1, 'warning', at, {}, a.hash);
    const chain = [
      { seq: 0, ...a, prev_hash: GENESIS },
      { seq: 1, ...b, prev_hash: a.hash },
    ];
    expect(verifyChain('lgp_1', chain)).toBe(true);
    expect(verifyChain('lgp_2', chain)).toBe(false);
    expect(verifyChain('lgp_1', [chain[1]!])).toBe(false);
    expect(verifyChain('lgp_1', [chain[0]!, { ...chain[1]!, canonical: chain[1]!.canonical.replace('warning', 'released') }])).toBe(false);
  });
});
