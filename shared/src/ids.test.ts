import { describe, expect, it } from 'vitest';
import { PREFIX, newId, newSecret, randomId } from './ids.ts';

describe('PREFIX', () => {
  it('has the public prefixes', () => {
    expect(PREFIX).toEqual({
      apiKeyId: 'key_',
      apiKeySecret: 'sk-svc_',
      session: 'sess_',
      account: 'acct_',
      nodeKey: 'nk-svc_',
      node: 'node_',
      file: 'file-',
      video: 'vid_',
      call: 'call_',
      request: 'req_',
      oauthClient: 'oauthc_',
      oauthCode: 'oac-svc_',
      oauthAccessToken: 'oat-svc_',
      oauthRefreshToken: 'ort-svc_',
    });
  });

  it('no prefix is a prefix of another (ids are unambiguous by prefix)', () => {
    const all = Object.values(PREFIX);
    for (const a of all) for (const b of all) if (a !== b) expect(b.startsWith(a), `${a} / ${b}`).toBe(false);
  });
});

describe('randomId', () => {
  it('is 24 lowercase base36 characters by default', () => {
    for (let i = 0; i < 200; i++) expect(randomId()).toMatch(/^[0-9a-z]{24}$/);
  });

  it('honours the requested length', () => {
    for (const n of [1, 2, 8, 24, 32, 100, 500]) {
      const id = randomId(n);
      expect(id).toHaveLength(n);
      expect(id).toMatch(/^[0-9a-z]+$/);
    }
    expect(randomId(0)).toBe('');
  });

  it('uses the whole alphabet roughly uniformly', () => {
    const counts = new Map<string, number>();
    const sample = randomId(36 * 10_000);
    for (const c of sample) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect([...counts.keys()].sort().join('')).toBe('0123456789abcdefghijklmnopqrstuvwxyz');
    // Expected 10000 per symbol (sd ~ 98). A naive b % 36 over all 256 byte values would give the first
    // four symbols 8/256 of the draws (11250) and the rest 7/256 (9844); the bounds are 5 sd wide.
    for (const [c, n] of counts) {
      expect(n, c).toBeGreaterThan(9500);
      expect(n, c).toBeLessThan(10_500);
    }
  });
});

describe('newId', () => {
  it.each(Object.entries(PREFIX))('%s ids start with %s and carry 24 base36 characters', (_name, prefix) => {
    const id = newId(prefix);
    expect(id.startsWith(prefix)).toBe(true);
    expect(id.slice(prefix.length)).toMatch(/^[0-9a-z]{24}$/);
    expect(id).toHaveLength(prefix.length + 24);
  });

  it('honours a custom length', () => {
    expect(newId('x_', 10)).toMatch(/^x_[0-9a-z]{10}$/);
  });

  it('does not repeat over many draws', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 50_000; i++) seen.add(newId(PREFIX.request));
    expect(seen.size).toBe(50_000);
    const short = new Set<string>();
    for (let i = 0; i < 5000; i++) short.add(randomId(8)); // 36^8 ≈ 2.8e12: collisions vanishingly rare
    expect(short.size).toBe(5000);
  });
});

describe('newSecret', () => {
  it('is the prefix plus 43 base64url characters encoding exactly 32 bytes', () => {
    for (const prefix of [PREFIX.apiKeySecret, PREFIX.nodeKey]) {
      const s = newSecret(prefix);
      expect(s.startsWith(prefix)).toBe(true);
      const body = s.slice(prefix.length);
      expect(body).toMatch(/^[A-Za-z0-9_-]{43}$/); // no padding, no + or /
      const raw = Buffer.from(body, 'base64url');
      expect(raw).toHaveLength(32);
      expect(raw.toString('base64url')).toBe(body); // canonical encoding
    }
  });

  it('does not repeat and is not constant across bit positions', () => {
    const seen = new Set<string>();
    let or = Buffer.alloc(32);
    let and = Buffer.alloc(32, 0xff);
    for (let i = 0; i < 2000; i++) {
      const s = newSecret('sk-svc_');
      seen.add(s);
      const raw = Buffer.from(s.slice(7), 'base64url');
      or = Buffer.from(or.map((b, j) => b | raw[j]!));
      and = Buffer.from(and.map((b, j) => b & raw[j]!));
    }
    expect(seen.size).toBe(2000);
    // Every one of the 256 bits was seen both set and clear.
    expect(or.equals(Buffer.alloc(32, 0xff))).toBe(true);
    expect(and.equals(Buffer.alloc(32, 0))).toBe(true);
  });
});
