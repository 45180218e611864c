import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { recoverMessageAddress } from 'viem';
import { canonicalize, generatePrivateKey, receiptHash, recoverPersonalMessage, signPersonalMessage, type Hex, type ReceiptPayload } from '@svc/shared';
import { receiptPayload } from './batch-calls.ts';
import { ReceiptSigner } from './signer.ts';

const payload = (i: number): Omit<ReceiptPayload, 'signer'> => ({
  v: 1,
  id: `req_${i}`,
  kind: 'inference',
  account_id: 'acct_1',
  key_id: 'key_1',
  usage_event_id: `ue_${i}`,
  route: 'POST /v1/chat/completions',
  model: 'm',
  units: { input_tokens: 9 + i, output_tokens: 2, note: 'naïve ✓ 😀' },
  cost_micro_usd: 13 + i,
  created_at: '2026-11-23T00:00:00.000Z',
  run: null,
  policy: null,
});

const SIGNER_MODULE = JSON.stringify(fileURLToPath(new URL('./signer.ts', import.meta.url)));
/** Runs an ES module script in a child Node process from the repository root (for process-lifetime behaviour). */
const runScript = (script: string, timeout: number) =>
  spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('../../../..', import.meta.url)), encoding: 'utf8', timeout });

const HALF_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n >> 1n;

describe('ReceiptSigner.signReceipt (inline, with nonces prepared on its worker)', () => {
  it('signs receipts that any Ethereum library recovers to the signer: low-s, both recovery ids, no nonce used twice', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key);
    try {
      await signer.warm();
      expect(signer.ready).toBeGreaterThan(0);
      const receipts = Array.from({ length: 400 }, (_, i) => signer.signReceipt(payload(i)));
      expect(signer.signedPrepared).toBe(400);
      const rs = new Set<string>();
      const vs = new Set<string>();
      for (const [i, r] of receipts.entries()) {
        expect(r.canonical).toBe(canonicalize({ ...payload(i), signer: signer.address }));
        expect(recoverPersonalMessage(r.canonical, r.signature)).toBe(signer.address); // refuses high-s
        expect(BigInt(`0x${r.signature.slice(66, 130)}`)).toBeLessThanOrEqual(HALF_N);
        expect(r.signature).not.toBe(signPersonalMessage(key, r.canonical)); // random nonces, not RFC 6979's
        rs.add(r.signature.slice(2, 66));
        vs.add(r.signature.slice(130));
      }
      expect(rs.size).toBe(400);
      expect([...vs].sort()).toEqual(['1b', '1c']);
      for (const r of receipts.slice(0, 20)) expect(await recoverMessageAddress({ message: r.canonical, signature: r.signature })).toBe(signer.address);

      const doc = signer.signDocument({ statement: 'hello', n: 1 });
      expect(await recoverMessageAddress({ message: doc.canonical, signature: doc.signature })).toBe(signer.address);
      expect(signer.signedPrepared).toBe(401);
    } finally {
      await signer.close();
    }
  });

  it('asks its worker for more before the pool runs out, and no nonce repeats across its batches', async () => {
    const signer = new ReceiptSigner(generatePrivateKey());
    try {
      const rs = new Set<string>();
      let signed = 0;
      for (let round = 0; round < 3; round++) {
        if (round === 0) await signer.warm();
        else await vi.waitFor(() => expect(signer.ready).toBeGreaterThan(0), { timeout: 10_000 }); // asked for when the pool ran low
        while (signer.ready > 0) rs.add(signer.signReceipt(payload(signed++)).signature.slice(2, 66)); // uses up every nonce it has
      }
      expect(signer.signedPrepared).toBe(signed);
      expect(signed).toBeGreaterThanOrEqual(3 * 512); // three batches of the worker
      expect(rs.size).toBe(signer.signedPrepared);
    } finally {
      await signer.close();
    }
  });

  it('drops nonces that arrive after close, and signs the usual way from then on', async () => {
    const key = generatePrivateKey();
    for (let i = 0; i < 5; i++) {
      const signer = new ReceiptSigner(key);
      await signer.warm();
      while (signer.ready >= 256) signer.signReceipt(payload(i)); // below the low mark: more were asked for
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300); // the event loop blocked while the worker answers into the port
      const closing = signer.close();
      await closing;
      for (let turn = 0; turn < 20; turn++) await new Promise((r) => setImmediate(r)); // an answer already in the port would land here
      expect(signer.ready).toBe(0);
      const before = signer.signedPrepared;
      expect(signer.signReceipt(payload(7)).signature).toBe(signPersonalMessage(key, canonicalize({ ...payload(7), signer: signer.address })));
      expect(signer.signedPrepared).toBe(before);
    }
  });

  it('closes while its worker is preparing nonces without taking the process down', () => {
    // worker.terminate() inside a libsecp256k1 call aborts the process ("terminate called after throwing an
    // instance of 'Napi::Error'"); close() lets the worker end by itself instead.
    const script = `
      import { generatePrivateKey } from '@svc/shared';
      import { ReceiptSigner } from ${SIGNER_MODULE};
      for (let i = 0; i < 30; i++) {
        const s = new ReceiptSigner(generatePrivateKey());
        void s.warm();
        await new Promise((r) => setTimeout(r, 20 + (i % 5) * 10)); // the worker is inside its batch
        await s.close();
      }
      console.log('closed 30');
    `;
    const r = runScript(script, 120_000);
    expect(r.stderr).not.toContain('terminate called');
    expect([r.status, r.stdout.trim()]).toEqual([0, 'closed 30']);
  });

  it('does not keep a process alive once it has nothing to answer', () => {
    const script = `
      import { generatePrivateKey } from '@svc/shared';
      import { ReceiptSigner } from ${SIGNER_MODULE};
      const s = new ReceiptSigner(generatePrivateKey());
      await s.warm();
      s.signReceipt({ v: 1, id: 'req_1', kind: 'k', account_id: 'a', key_id: null, usage_event_id: 'ue_1', route: 'r', model: null, units: {}, cost_micro_usd: 1, created_at: 'x', run: null, policy: null });
      await s.signLater({ v: 1, id: 'req_2', kind: 'k', account_id: 'a', key_id: null, usage_event_id: 'ue_2', route: 'r', model: null, units: {}, cost_micro_usd: 1, created_at: 'x', run: null, policy: null });
      console.log('prepared', s.signedPrepared, 'offthread', s.signedOffThread);
    `;
    const r = runScript(script, 60_000);
    expect(r.signal).toBeNull(); // not killed by the time limit: it ended by itself
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe('prepared 1 offthread 1');
  });

  it('with preparedNonces off, signs the usual way (RFC 6979) and never asks its worker for nonces', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key, { preparedNonces: false });
    await signer.warm();
    const r = signer.signReceipt(payload(3));
    expect(r.signature).toBe(signPersonalMessage(key, canonicalize({ ...payload(3), signer: signer.address })));
    expect(signer.signDocument({ a: 1 }).signature).toBe(signPersonalMessage(key, canonicalize({ a: 1 })));
    expect([signer.ready, signer.signedPrepared]).toEqual([0, 0]);
    await signer.close();
  });

  it('signs the usual way (RFC 6979) while it has no nonces: before the first arrive and after close', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key);
    const usual = (s: Hex, i: number) => expect(s).toBe(signPersonalMessage(key, canonicalize({ ...payload(i), signer: signer.address })));
    usual(signer.signReceipt(payload(1)).signature, 1); // not warmed: no nonces are prepared
    await signer.warm();
    await signer.close();
    usual(signer.signReceipt(payload(2)).signature, 2);
    expect(signer.signedPrepared).toBe(0);
  });
});

describe('ReceiptSigner.signLater (on the worker thread)', () => {
  const usual = (key: Hex, signerAddress: Hex, i: number) => signPersonalMessage(key, canonicalize({ ...payload(i), signer: signerAddress }));

  it('signs many in one turn with nonces it prepares itself: each recovers to the signer, low s, no nonce twice, the right hash', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key);
    try {
      // More than one of the worker's batches of nonces (256).
      const later = await Promise.all(Array.from({ length: 300 }, (_, i) => signer.signLater(payload(i))));
      const rs = new Set<string>();
      for (const [i, r] of later.entries()) {
        expect(r.canonical).toBe(canonicalize({ ...payload(i), signer: signer.address }));
        expect(r.hash).toBe(receiptHash(r.canonical));
        expect(recoverPersonalMessage(r.canonical, r.signature)).toBe(signer.address);
        expect(BigInt(`0x${r.signature.slice(66, 130)}`) <= HALF_N).toBe(true);
        expect(r.signature).not.toBe(usual(key, signer.address, i)); // its own nonce, not RFC 6979's
        rs.add(r.signature.slice(2, 66));
      }
      expect(rs.size).toBe(300);
      expect(new Set(later.map((r) => r.signature.slice(-2)))).toEqual(new Set(['1b', '1c']));
      expect(signer.signedOffThread).toBe(300);
      expect(await recoverMessageAddress({ message: later[7]!.canonical, signature: later[7]!.signature })).toBe(signer.address);
    } finally {
      await signer.close();
    }
  });

  it('with preparedNonces off, signs many in one turn, the same bytes as the usual inline signature (RFC 6979), with the right hash', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key, { preparedNonces: false });
    try {
      const later = await Promise.all(Array.from({ length: 40 }, (_, i) => signer.signLater(payload(i))));
      for (const [i, r] of later.entries()) {
        expect(r.signature).toBe(usual(key, signer.address, i));
        expect(r.canonical).toBe(canonicalize({ ...payload(i), signer: signer.address }));
        expect(r.hash).toBe(receiptHash(r.canonical));
      }
      expect(signer.signedOffThread).toBe(40);
      expect(await recoverMessageAddress({ message: later[7]!.canonical, signature: later[7]!.signature })).toBe(signer.address);
    } finally {
      await signer.close();
    }
  });

  it('signs inline once the worker is gone, including what was on its way', async () => {
    const key = generatePrivateKey();
    const signer = new ReceiptSigner(key);
    const first = signer.signLater(payload(1));
    const closing = signer.close(); // the worker goes while the first receipt is gathered
    const after = signer.signLater(payload(2));
    await closing;
    expect((await first).signature).toBe(usual(key, signer.address, 1));
    expect((await after).signature).toBe(usual(key, signer.address, 2));
    expect(signer.signedOffThread).toBe(0);
  });
});

describe('receipt key order', () => {
  it("a settle's receipt is built in canonical key order, signer included, so its canonical text is its JSON.stringify", async () => {
    const signer = new ReceiptSigner(generatePrivateKey(), { preparedNonces: false });
    try {
      const hold = { id: 'hold_1', accountId: 'acct_1', keyId: 'key_1', amount: 100, requestId: 'req_1', runId: 'run_1', route: 'POST /v1/chat/completions', runHead: null, runCount: 0, chain: ['key_1'], lease: false };
      const usage = { costMicroUsd: 13, kind: 'inference', model: 'm', units: { input_tokens: 9, output_tokens: 2 }, detail: { upstream: 'p' }, policy: null };
      for (const [h, u] of [[hold, usage], [{ ...hold, runId: null }, usage], [hold, { ...usage, detail: undefined }]] as const) {
        const now = new Date('2026-11-24T00:00:00.000Z');
        const receipts = [signer.signReceipt(receiptPayload(h, u, 'ue_1', now, '0xabc', 4, signer.address)), await signer.signLater(receiptPayload(h, u, 'ue_1', now, '0xabc', 4, signer.address))];
        for (const r of receipts) {
          expect(r.canonical).toBe(JSON.stringify(r.payload));
          expect(r.canonical).toBe(canonicalize(JSON.parse(r.canonical)));
          expect(r.payload.signer).toBe(signer.address);
          expect('detail' in JSON.parse(r.canonical)).toBe(u.detail !== undefined);
        }
      }
      // Any other order signs the same canonical bytes.
      const shuffled = signer.signReceipt({ ...payload(1) });
      expect(shuffled.canonical).toBe(canonicalize(shuffled.payload));
      expect(Object.keys(JSON.parse(shuffled.canonical))).toEqual(Object.keys(shuffled.payload).sort());
    } finally {
      await signer.close();
    }
  });
});
