import { describe, expect, it } from 'vitest';
import { canonicalize, generatePrivateKey, privateKeyToAddress, signPersonalMessage, type Hex } from '@svc/shared';
import { checkClaim, members, plainText, signatureParts, valueAt, type EscrowTerms } from './check.ts';

const enc = new TextEncoder();
const KEY = generatePrivateKey();
const SIGNER = privateKeyToAddress(KEY);
const OTHER = generatePrivateKey();

const receipt = (extra: Record<string, unknown> = {}) =>
  canonicalize({ v: 1, id: 'req_abc', kind: 'notary', account_id: 'acct_1', run: { id: 'run-1', seq: 1, prev: null }, detail: { label: '"id":"req_x","kind":"x"' }, ...extra });
const terms = (t: Partial<EscrowTerms> = {}): EscrowTerms => ({ kind: 'notary', jobField: 'id', jobId: null, ...t });
const check = (payload: string, t: Partial<EscrowTerms> = {}, signature: string = signPersonalMessage(KEY, payload)) => checkClaim({ payload, signature, signer: SIGNER, terms: terms(t) });
const codes = (c: ReturnType<typeof checkClaim>) => c.reasons.map((r) => r.code);

describe('plainText', () => {
  it('accepts text whose JSON string is itself between quotes, refuses what JSON escapes', () => {
    for (const s of ['', 'notary', 'req_abc', 'é€😀', 'a/b', 'x\u007f']) expect(plainText(s), s).toBe(true);
    for (const s of ['a"b', 'a\\b', 'a\nb', '\u0000', '\u001f', '\ud800', 'x\udc00y']) expect(plainText(s), JSON.stringify(s)).toBe(false);
  });
});

describe('the byte scan of top-level members', () => {
  it('counts only top-level keys: nested keys and look-alikes inside strings do not count', () => {
    const p = enc.encode(receipt());
    const m = members(p, enc.encode('id'));
    expect(m).toMatchObject({ object: true, jobCount: 1, kindCount: 1 });
    expect(valueAt(p, m.jobAt, enc.encode('req_abc'))).toBe(true);
    expect(valueAt(p, m.kindAt, enc.encode('notary'))).toBe(true);
    expect(members(p, enc.encode('label')).jobCount).toBe(0); // only inside detail
    expect(members(p, enc.encode('seq')).jobCount).toBe(0); // only inside run
  });

  it('compares whole values: a prefix, a longer value or a non-string does not match', () => {
    const p = enc.encode('{"id":"req_abc","kind":"notary","n":12}');
    const m = members(p, enc.encode('id'));
    expect(valueAt(p, m.jobAt, enc.encode('req_ab'))).toBe(false);
    expect(valueAt(p, m.jobAt, enc.encode('req_abcd'))).toBe(false);
    const n = members(p, enc.encode('n'));
    expect(valueAt(p, n.jobAt, enc.encode('12'))).toBe(false);
  });

  it('refuses what is not one object: an array, bytes after the object, an open string or object', () => {
    for (const s of ['[{"id":"a"}]', '{"id":"a"}x', '{"id":"a"}{}', '{"id":"a}', '{"id":"a"', '{}}', '"{}"', '{', '']) {
      expect(members(enc.encode(s), enc.encode('id')).object, s).toBe(false);
    }
    expect(members(enc.encode('{}'), enc.encode('id'))).toMatchObject({ object: true, jobCount: 0 });
  });

  it('skips escaped quotes and backslashes inside strings', () => {
    const p = enc.encode('{"a":"x\\\\","id":"j","b":"\\",\\"kind\\":\\"k","kind":"k"}');
    const m = members(p, enc.encode('id'));
    expect(m).toMatchObject({ object: true, jobCount: 1, kindCount: 1 });
    expect(valueAt(p, m.kindAt, enc.encode('k'))).toBe(true);
  });

  it('agrees with JSON semantics on canonical payloads (random objects)', () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000);
    const pick = <T,>(a: T[]) => a[Math.floor(rnd() * a.length)]!;
    const keys = ['id', 'kind', 'job', 'run', 'idx', 'i', 'kinds', 'd"q', 'b\\s'];
    const strings = ['req_1', 'notary', '', '"id":"req_1"', 'a\\"b', '}', '{', ']', ',"kind":"notary"', 'é😀', '\n'];
    const value = (depth: number): unknown => {
      const k = Math.floor(rnd() * (depth > 2 ? 4 : 6));
      if (k === 0) return pick(strings);
      if (k === 1) return Math.floor(rnd() * 100);
      if (k === 2) return pick([null, true, false]);
      if (k === 3) return pick(strings);
      if (k === 4) return Array.from({ length: Math.floor(rnd() * 3) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, () => [pick(keys), value(depth + 1)]));
    };
    for (let i = 0; i < 500; i++) {
      const obj = Object.fromEntries(Array.from({ length: Math.floor(rnd() * 5) }, () => [pick(keys), value(1)])) as Record<string, unknown>;
      const text = canonicalize(obj);
      const p = enc.encode(text);
      for (const field of ['id', 'job', 'd"q']) {
        const m = members(p, enc.encode(JSON.stringify(field).slice(1, -1)));
        expect(m.object, text).toBe(true);
        expect(m.jobCount, text).toBe(field in obj ? 1 : 0);
        for (const want of ['req_1', 'notary', '']) {
          expect(m.jobCount === 1 && valueAt(p, m.jobAt, enc.encode(want)), `${text} ${field}=${want}`).toBe(obj[field] === want);
        }
        expect(m.kindCount, text).toBe('kind' in obj ? 1 : 0);
      }
    }
  });
});

describe('checkClaim', () => {
  it('is claimable when the signature recovers and the payload binds; names the job id and its offset', () => {
    const payload = receipt();
    const c = check(payload);
    expect(c.reasons).toEqual([]);
    expect(c.claimable).toBe(true);
    expect(c.job_id).toBe('req_abc');
    expect(c.job).toMatchObject({ ok: true, field: 'id', occurrences: 1, value: 'req_abc' });
    expect(payload.slice(c.job.offset!, c.job.offset! + 10)).toBe(':"req_abc"');
    expect(c.kind).toMatchObject({ ok: true, expected: 'notary', declared: 'notary', occurrences: 1 });
    expect(c.signature).toEqual({ ok: true, recovered_address: SIGNER, expected_signer: SIGNER });
    expect(check(payload, { jobId: 'req_abc' }).claimable).toBe(true);
  });

  it('refuses a signature from another key, a tampered payload and a malformed or high-s signature', () => {
    const payload = receipt();
    const other = check(payload, {}, signPersonalMessage(OTHER, payload));
    expect(codes(other)).toEqual(['signature_mismatch']);
    expect(other.signature.recovered_address).toBe(privateKeyToAddress(OTHER));
    const tampered = receipt({ cost_micro_usd: 0 });
    expect(codes(check(tampered, {}, signPersonalMessage(KEY, payload)))).toEqual(['signature_mismatch']);
    expect(codes(check(payload, {}, '0x1234'))).toEqual(['signature_invalid']);
    const sig = signPersonalMessage(KEY, payload);
    const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${sig.slice(66, 130)}`);
    const v = parseInt(sig.slice(130), 16);
    const high = `${sig.slice(0, 66)}${(N - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
    expect(codes(check(payload, {}, high))).toEqual(['signature_invalid']);
    const v01 = `${sig.slice(0, 130)}${(v - 27).toString(16).padStart(2, '0')}`;
    expect(check(payload, {}, v01).claimable).toBe(true); // v in {0, 1} recovers too, as on chain
  });

  it('matches the kind exactly; an empty kind means the receipt declares none', () => {
    expect(codes(check(receipt(), { kind: 'inference' }))).toEqual(['kind_mismatch']);
    expect(codes(check(receipt(), { kind: 'notar' }))).toEqual(['kind_mismatch']);
    expect(codes(check(receipt(), { kind: 'notaryx' }))).toEqual(['kind_mismatch']);
    expect(codes(check(receipt(), { kind: 'Notary' }))).toEqual(['kind_mismatch']);
    const declared = check(receipt(), { kind: '' });
    expect(codes(declared)).toEqual(['kind_declared']);
    expect(declared.kind.declared).toBe('notary');
    const none = canonicalize({ id: 'req_abc', detail: { kind: 'notary' } });
    expect(check(none, { kind: '' }).claimable).toBe(true);
    expect(codes(check(none, { kind: 'notary' }))).toEqual(['kind_missing']);
    expect(codes(check(canonicalize({ id: 'req_abc', kind: null }), { kind: '' }))).toEqual(['kind_declared']);
    expect(codes(check(canonicalize({ id: 'req_abc', kind: '' }), { kind: '' }))).toEqual(['kind_declared']);
    expect(codes(check('{"id":"req_abc","kind":"notary","kind":"notary"}'))).toEqual(['kind_repeated']);
  });

  it('binds a single top-level job-id field with a plain string value, equal to the escrow job id when given', () => {
    expect(codes(check(receipt(), { jobId: 'req_abd' }))).toEqual(['job_id_mismatch']);
    expect(codes(check(receipt(), { jobField: 'label' }))).toEqual(['job_field_missing']); // nested in detail only
    expect(codes(check(receipt(), { jobField: 'run' }))).toEqual(['job_id_not_string']);
    expect(codes(check(receipt(), { jobField: 'v' }))).toEqual(['job_id_not_string']);
    expect(codes(check(canonicalize({ id: 'a"b', kind: 'notary' })))).toEqual(['job_id_not_plain']);
    expect(codes(check('{"id":"req_abc","id":"req_abc","kind":"notary"}'))).toEqual(['job_field_repeated']);
    expect(codes(check('[{"id":"req_abc","kind":"notary"}]'))).toEqual(['payload_not_object']);
    const usage = check(receipt({ usage_event_id: 'ue_9' }), { jobField: 'usage_event_id' });
    expect(usage.claimable).toBe(true);
    expect(usage.job_id).toBe('ue_9');
  });

  it('lists every failed precondition at once', () => {
    const payload = receipt();
    expect(codes(check(payload, { kind: '', jobId: 'other' }, signPersonalMessage(OTHER, payload)))).toEqual(['signature_mismatch', 'job_id_mismatch', 'kind_declared']);
  });
});

describe('signatureParts', () => {
  it('splits r, s and v (27 or 28) and gives the EIP-191 digest', () => {
    const payload = receipt();
    const sig = signPersonalMessage(KEY, payload);
    const p = signatureParts(payload, sig);
    expect(p.r).toBe(sig.slice(0, 66));
    expect(p.s).toBe(`0x${sig.slice(66, 130)}`);
    expect([27, 28]).toContain(p.v);
    expect(p.digest).toMatch(/^0x[0-9a-f]{64}$/);
    expect(signatureParts(payload, '0x12')).toMatchObject({ v: null, r: null, s: null });
  });
});
