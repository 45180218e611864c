import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { recoverMessageAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { jcs, notarize, notaryAccount, sha, type Notarized, type Payload, type ProofBody, type ReceiptBody, type RunBody } from './support/notary.ts';

const PRICE = 1_000;
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: {
      ...ENFORCED_BILLING,
      SVC_NOTARY_PRICE_MICRO_USD: String(PRICE), SVC_HEALTH_SAMPLE_SECONDS: '60' } });
});
afterAll(async () => t?.close());


/** Recomputes a run chain in the test, trusting nothing the gateway computed. */
function recomputeChain(run: RunBody, signer: string, runId: string) {
  let prev: string | null = null;
  let cost = 0;
  run.receipts.forEach((r, i) => {
    expect(jcs(r.payload)).toBe(r.canonical);
    expect(sha(r.canonical)).toBe(r.hash);
    expect(r.seq).toBe(i + 1);
    expect(r.prev_hash).toBe(prev);
    expect(r.payload.run).toEqual({ id: runId, seq: i + 1, prev });
    expect(verifyMessage(r.canonical, r.signature)).toBe(signer);
    cost += r.payload.cost_micro_usd as number;
    prev = sha(r.canonical);
  });
  return { head: prev, count: run.receipts.length, cost };
}

const errorOf = async (res: Response) => {
  const b = (await res.json()) as { error: Record<string, unknown> };
  const { request_id: _r, ...rest } = b.error;
  return { status: res.status, ...rest };
};

let A: Awaited<ReturnType<typeof notaryAccount>>;
let run1: Notarized[];
let other: Notarized;
let loose: Notarized;
let signer: string;

beforeAll(async () => {
  A = await notaryAccount(t);
  run1 = [];
  for (let i = 0; i < 4; i++) {
    run1.push(await notarize(A.api, 'run-1'));
    t.clock.advance(1_000);
  }
  other = await notarize(A.api, 'run-2');
  loose = await notarize(A.api);
  signer = t.gw.services.signer.address;
});

describe('receipt signer', () => {
  it('publishes its address, scheme and receipt header names', async () => {
    const k = await t.client.request<Record<string, unknown>>('GET', '/v1/receipts/pubkey');
    expect(k).toEqual({
      address: signer,
      scheme: 'eip191-personal_sign',
      curve: 'secp256k1',
      canonicalization: 'RFC 8785',
      hash: 'sha256 of the canonical JSON, 0x-hex',
      headers: { ...RECEIPT_HEADERS },
    });
    expect(signer).toMatch(/^0x[0-9a-fA-F]{40}$/);
  });
});

describe('fetching receipts', () => {
  it('by request id and by usage-event id, with the stored canonical text that another library verifies', async () => {
    const r = run1[0]!;
    const byId = await A.client.request<ReceiptBody>('GET', `/v1/receipts/${r.id}`);
    expect(byId).toEqual({
      id: r.id,
      usage_event_id: r.payload.usage_event_id,
      kind: 'notary',
      payload: r.payload,
      canonical: r.canonical,
      hash: sha(r.canonical),
      signature: r.signature,
      signer,
      run_id: 'run-1',
      run_seq: 1,
      prev_hash: null,
      shared: false,
      created_at: r.payload.created_at,
    });
    expect(byId.usage_event_id).toMatch(/^ue_/);
    const byEvent = await A.client.request<ReceiptBody>('GET', `/v1/receipts/${byId.usage_event_id}`);
    expect(byEvent).toEqual(byId);
    expect(verifyMessage(byId.canonical, byId.signature)).toBe(signer);
    expect(jcs(byId.payload)).toBe(byId.canonical);

    const noRun = await A.client.request<ReceiptBody>('GET', `/v1/receipts/${loose.id}`);
    expect(noRun).toMatchObject({ run_id: null, run_seq: null, prev_hash: null });
    expect(noRun.payload.run).toBeNull();
  });

  it('an unknown id is 404 and an over-long id is 400', async () => {
    await expectApiError(A.client.request('GET', '/v1/receipts/req_doesnotexist'), 404, 'not_found');
    await expectApiError(A.client.request('GET', `/v1/receipts/${'x'.repeat(129)}`), 400, 'invalid_request');
  });
});

describe('POST /v1/receipts/verify', () => {
  const verify = (body: unknown) => t.client.raw('POST', '/v1/receipts/verify', { body });

  it('accepts the payload object, the canonical text and the header base64url', async () => {
    const r = run1[1]!;
    for (const receipt of [r.payload, r.canonical, Buffer.from(r.canonical).toString('base64url')]) {
      const res = await verify({ receipt, signature: r.signature });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ valid: true, recovered_address: signer, payload: r.payload });
    }
  });

  it('a flipped byte or another key gives valid:false with 200, never an error', async () => {
    const r = run1[1]!;
    const i = r.canonical.indexOf(r.payload.detail.input_sha256 as string) + 10;
    const flipped = r.canonical.slice(0, i) + (r.canonical[i] === 'a' ? 'b' : 'a') + r.canonical.slice(i + 1);
    expect(flipped).not.toBe(r.canonical);
    const a = await verify({ receipt: flipped, signature: r.signature });
    expect(a.status).toBe(200);
    const ab = (await a.json()) as { valid: boolean; recovered_address: string | null; payload: Payload };
    expect(ab.valid).toBe(false);
    expect(ab.recovered_address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(ab.recovered_address).not.toBe(signer);
    expect(ab.payload).toEqual(JSON.parse(flipped));

    const intruder = privateKeyToAccount(generatePrivateKey());
    const forged = await intruder.signMessage({ message: r.canonical });
    const b = await verify({ receipt: r.canonical, signature: forged });
    expect(b.status).toBe(200);
    expect(await b.json()).toEqual({ valid: false, recovered_address: intruder.address, payload: r.payload });

    for (const [receipt, signature] of [
      ['%%% not a receipt %%%', r.signature],
      [r.canonical, '0x1234'],
      ['{"unterminated": ', r.signature],
    ]) {
      const res = await verify({ receipt, signature });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { valid: boolean }).valid).toBe(false);
    }
  });

  it('a missing field is a 400 from the schema', async () => {
    const res = await verify({ receipt: run1[0]!.payload });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('signature');
  });
});

describe('run chains', () => {
  it('lists runs and recomputes run-1 independently: hashes, links, signatures, head and total agree with the proof', async () => {
    const list = await A.client.request<{ runs: Array<Omit<RunBody, 'receipts'>> }>('GET', '/v1/runs');
    expect(list.runs.map((r) => r.id).sort()).toEqual(['run-1', 'run-2']);
    // latest activity first: run-2 was extended after run-1
    expect(list.runs[0]!.id).toBe('run-2');

    const run = await A.client.request<RunBody>('GET', '/v1/runs/run-1');
    expect(run.receipts.map((r) => r.id)).toEqual(run1.map((r) => r.id));
    const mine = recomputeChain(run, signer, 'run-1');
    expect(mine).toEqual({ head: run.head_hash, count: 4, cost: 4 * PRICE });
    expect(run).toMatchObject({ receipt_count: 4, total_cost_micro_usd: 4 * PRICE });
    expect(list.runs.find((r) => r.id === 'run-1')).toEqual({ id: 'run-1', receipt_count: 4, total_cost_micro_usd: 4 * PRICE, head_hash: mine.head, first_at: run.first_at, last_at: run.last_at });

    const p = await A.client.request<ProofBody>('POST', '/v1/runs/run-1/proof');
    expect(p.proof).toMatchObject({
      run_id: 'run-1',
      account_id: A.accountId,
      head_hash: mine.head,
      receipt_count: 4,
      total_cost_micro_usd: 4 * PRICE,
      span: { first_at: run.first_at, last_at: run.last_at, seconds: 3 },
      chain_valid: true,
      failures: [],
      anchor: { state: 'not_anchored' },
      generated_at: t.clock.now().toISOString(),
    });
    expect(jcs(p.proof)).toBe(p.canonical);
    expect(p.signer).toBe(signer);
    expect(await recoverMessageAddress({ message: p.canonical, signature: p.signature })).toBe(signer);
    // the signed proof also verifies through the public verify route
    const v = await t.client.request<{ valid: boolean }>('POST', '/v1/receipts/verify', { body: { receipt: p.canonical, signature: p.signature } });
    expect(v.valid).toBe(true);

    const r2 = await A.client.request<RunBody>('GET', '/v1/runs/run-2');
    expect(r2.receipts.map((r) => r.id)).toEqual([other.id]);
    expect(recomputeChain(r2, signer, 'run-2').head).toBe(r2.head_hash);
    await expectApiError(A.client.request('GET', '/v1/runs/run-none'), 404, 'not_found');
  });

  it('10 concurrent requests in new runs and 10 more on a run head make single unbroken chains', async () => {
    const B = await notaryAccount(t);
    // The first receipts of a run are the racy case: five fresh runs, one after another, 10 parallel requests each.
    const ids = ['run-par-a', 'run-par-b', 'run-par-c', 'run-par-d', 'run-par-e'];
    const sent: Notarized[][] = [];
    for (const id of ids) sent.push(await Promise.all(Array.from({ length: 10 }, () => notarize(B.api, id))));
    for (const [i, id] of ids.entries()) {
      const run = await B.client.request<RunBody>('GET', `/v1/runs/${id}`);
      expect(run.receipts.map((r) => r.seq), id).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(new Set(run.receipts.map((r) => r.id))).toEqual(new Set(sent[i]!.map((r) => r.id)));
      expect(recomputeChain(run, signer, id)).toEqual({ head: run.head_hash, count: 10, cost: 10 * PRICE });
    }
    await Promise.all(Array.from({ length: 10 }, () => notarize(B.api, 'run-par-a')));
    const more = await B.client.request<RunBody>('GET', '/v1/runs/run-par-a');
    expect(recomputeChain(more, signer, 'run-par-a')).toEqual({ head: more.head_hash, count: 20, cost: 20 * PRICE });
    expect((await B.client.request<ProofBody>('POST', '/v1/runs/run-par-a/proof')).proof).toMatchObject({ chain_valid: true, receipt_count: 20, failures: [] });
  });

  it('a tampered stored receipt makes the proof report chain_valid:false, even when the attacker also rewrites the hash', async () => {
    const C = await notaryAccount(t);
    const rs = [await notarize(C.api, 'run-t'), await notarize(C.api, 'run-t'), await notarize(C.api, 'run-t')];
    const proof = () => C.client.request<ProofBody>('POST', '/v1/runs/run-t/proof');
    expect((await proof()).proof.chain_valid).toBe(true);
    const db = t.gw.database.db;
    const tampered = rs[1]!.canonical.replace(`"cost_micro_usd":${PRICE}`, '"cost_micro_usd":1');
    expect(tampered).not.toBe(rs[1]!.canonical);

    await db.updateTable('receipts').set({ payload: tampered }).where('id', '=', rs[1]!.id).execute();
    const p1 = await proof();
    expect(p1.proof.chain_valid).toBe(false);
    expect(p1.proof.failures).toEqual(
      expect.arrayContaining([expect.stringMatching(/^seq 2 .*hash is not sha256/), expect.stringMatching(/^seq 2 .*signature/), expect.stringMatching(/^seq 3 .*prev_hash/)]),
    );
    expect(await recoverMessageAddress({ message: p1.canonical, signature: p1.signature })).toBe(signer);

    // Rewriting the stored hash too still fails: the signature and the next link give it away.
    await db.updateTable('receipts').set({ hash: sha(tampered) }).where('id', '=', rs[1]!.id).execute();
    const p2 = await proof();
    expect(p2.proof.chain_valid).toBe(false);
    expect(p2.proof.failures.some((f) => /^seq 2 .*hash is not/.test(f))).toBe(false);
    expect(p2.proof.failures).toEqual(expect.arrayContaining([expect.stringMatching(/^seq 2 .*signature/), expect.stringMatching(/^seq 3 .*prev_hash/)]));

    // Restoring the original row makes it whole again, so the check is about content, not history.
    await db.updateTable('receipts').set({ payload: rs[1]!.canonical, hash: sha(rs[1]!.canonical) }).where('id', '=', rs[1]!.id).execute();
    expect((await proof()).proof).toMatchObject({ chain_valid: true, failures: [] });

    // A removed receipt breaks the chain as well.
    await db.deleteFrom('receipts').where('id', '=', rs[0]!.id).execute();
    const p3 = await proof();
    expect(p3.proof.chain_valid).toBe(false);
    expect(p3.proof.failures).toEqual(expect.arrayContaining([expect.stringMatching(/^run records 3 receipts, 2 stored/)]));
  });
});

describe('sharing and the badge', () => {
  it('share makes a receipt public (idempotent); unshare makes it the same 404 as an unknown id', async () => {
    const r = run1[2]!;
    const anon = (path: string) => fetch(`${t.url}${path}`);
    const hidden = await anon(`/v1/receipts/shared/${r.id}`);
    const unknown = await anon('/v1/receipts/shared/req_unknown');
    expect(await errorOf(hidden)).toEqual(await errorOf(unknown));
    expect(hidden.status).toBe(404);

    const s = await A.client.request<Record<string, unknown>>('POST', `/v1/receipts/${r.id}/share`);
    expect(s).toEqual({
      id: r.id,
      shared: true,
      url: `${t.url}/v1/receipts/shared/${r.id}`,
      page_url: `${t.url}/r/${r.id}`,
      badge_url: `${t.url}/v1/receipts/${r.id}/badge.svg`,
    });
    // again, and by its usage-event id: same answer
    expect(await A.client.request('POST', `/v1/receipts/${r.payload.usage_event_id}/share`)).toEqual(s);
    expect((await A.client.request<ReceiptBody>('GET', `/v1/receipts/${r.id}`)).shared).toBe(true);

    const pub = await anon(`/v1/receipts/shared/${r.id}`);
    expect(pub.status).toBe(200);
    const body = (await pub.json()) as Record<string, any>;
    expect(body).toMatchObject({ id: r.id, kind: 'notary', payload: r.payload, canonical: r.canonical, hash: sha(r.canonical), signature: r.signature, signer, run_id: 'run-1', run_seq: 3 });
    expect(body.verification).toEqual({ valid: true, recovered_address: signer, signer });
    expect(body).not.toHaveProperty('usage_event_id');
    expect(body).not.toHaveProperty('shared');
    expect(verifyMessage(body.canonical, body.signature)).toBe(signer);

    const off = await A.client.request<Record<string, unknown>>('DELETE', `/v1/receipts/${r.id}/share`);
    expect(off).toMatchObject({ id: r.id, shared: false });
    expect(await A.client.request('DELETE', `/v1/receipts/${r.id}/share`)).toEqual(off);
    const gone = await anon(`/v1/receipts/shared/${r.id}`);
    expect(await errorOf(gone)).toEqual(await errorOf(await anon('/v1/receipts/shared/req_unknown')));
    expect((await anon(`/v1/receipts/${r.id}/badge.svg`)).status).toBe(404);
  });

  it('the badge re-verifies on every request, escapes its text, and is 404 unless shared', async () => {
    const D = await notaryAccount(t);
    const r = await notarize(D.api);
    const badge = () => fetch(`${t.url}/v1/receipts/${r.id}/badge.svg`);
    const before = await badge();
    const unknown = await fetch(`${t.url}/v1/receipts/req_unknown/badge.svg`);
    expect(await errorOf(before)).toEqual(await errorOf(unknown));
    expect(before.status).toBe(404);

    await D.client.request('POST', `/v1/receipts/${r.id}/share`);
    const ok = await badge();
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(ok.headers.get('cache-control')).toBe('no-cache');
    const good = await ok.text();
    expect(good).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(good).toContain('✓ verified');
    expect(good).not.toContain('✗ failed');
    expect(good).toContain('notary');
    expect(good).toContain('$0.001');

    const db = t.gw.database.db;
    await db.updateTable('receipts').set({ payload: r.canonical.replace(`"cost_micro_usd":${PRICE}`, '"cost_micro_usd":0') }).where('id', '=', r.id).execute();
    const bad = await (await badge()).text();
    expect(bad).toContain('✗ failed');
    expect(bad).not.toContain('✓ verified');
    expect(bad).toContain('$0.00');

    await db.updateTable('receipts').set({ payload: r.canonical, kind: '<script>alert("x")</script>&' }).where('id', '=', r.id).execute();
    const esc = await (await badge()).text();
    expect(esc).toContain('✓ verified');
    expect(esc).not.toContain('<script>');
    expect(esc).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;');
  });
});

describe('isolation', () => {
  it("another account gets the unknown-id 404 for your receipts and runs, and can't share them", async () => {
    const E = await notaryAccount(t, 0);
    const r = run1[0]!;
    const same = async (path: string, method = 'GET') => {
      const theirs = await E.client.raw(method, path.replace('%', r.id).replace('@', 'run-1'));
      const none = await E.client.raw(method, path.replace('%', 'req_nope').replace('@', 'run-nope'));
      expect(theirs.status, path).toBe(404);
      expect(await errorOf(theirs)).toEqual(await errorOf(none));
    };
    await same('/v1/receipts/%');
    await same(`/v1/receipts/${r.payload.usage_event_id}`);
    await same('/v1/receipts/%/share', 'POST');
    await same('/v1/receipts/%/share', 'DELETE');
    await same('/v1/runs/@');
    await same('/v1/runs/@/proof', 'POST');
    await same('/v1/runs/@/audit', 'POST');
    expect(await E.client.request('GET', '/v1/runs')).toEqual({ runs: [] });
    // and the owner's receipt stayed unshared
    expect((await A.client.request<ReceiptBody>('GET', `/v1/receipts/${r.id}`)).shared).toBe(false);
  });
});
