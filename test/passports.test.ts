import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { jcs, notarize, notaryAccount, sha } from './support/notary.ts';
import { expectApiError } from './support/expect-error.ts';
import { buf, hex, rootFromPath } from './support/merkle.ts';

/**
 * Passports end to end on a real local chain (anvil): accounts with real receipts in runs claim handles, mint
 * signed passports from their provable history, and everything a passport claims is checked from public data
 * alone with this file's own code: the commitment recomputed with `canonicalize` (RFC 8785) and node's
 * SHA-256, the inclusion with an RFC 6962 audit-path check written here, the signature recovered with viem,
 * and the root found on the chain. Then the registry document and KYA credentials with their real states.
 */

type Json = Record<string, any>;
interface Signed {
  document: Json;
  signature: Hex;
  signer: string;
  canonical: string;
  scheme: string;
}
interface Passport {
  object: 'passport';
  handle: string;
  version: number;
  verified_runs: number;
  receipts: number;
  commitment: string;
  credential: Signed;
  anchor: { state: string; root: string | null; hash: string };
  claimed_now?: boolean;
}
interface Proof {
  handle: string;
  version: number;
  credential: Signed;
  commitment_inputs: Json & { run_heads: string[] };
  commitment_canonical: string;
  commitment: string;
  anchor_state: string;
  batch_root: string | null;
  leaf_index: number | null;
  tree_size: number | null;
  audit_path: string[];
  anchors: Array<{ backend: string; type: string; chain_id: number; state: string; from: string; tx_hash: string | null; block_number: number | null }>;
}
interface Kya {
  id: string;
  handle: string;
  key_id: string;
  state: 'active' | 'superseded' | 'revoked';
  key_state: string;
  superseded_by: string | null;
  credential: Signed;
}

describe('passports, the registry document and KYA credentials', () => {
  let chain: TestChain;
  let t: TestGateway;
  let signer: string;
  const anchorKey = generatePrivateKey();
  const anchorer = privateKeyToAccount(anchorKey);
  type Account = Awaited<ReturnType<typeof notaryAccount>>;
  let A: Account, B: Account, C: Account;
  const tag = Math.random().toString(36).slice(2, 8);
  const handles = { a: `alpha-${tag}`, b: `bravo-${tag}`, c: `charlie-${tag}` };

  const get = async <T>(path: string): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${t.url}${path}`); // public: no credential
    return { status: res.status, body: (await res.json()) as T };
  };
  const mint = (a: Account, handle: string) => a.client.request<Passport>('POST', '/v1/passport', { body: { handle } });

  beforeAll(async () => {
    chain = await startChain();
    await chain.pub.request({ method: 'anvil_setBalance' as never, params: [anchorer.address, '0xde0b6b3a7640000'] as never });
    const dir = mkdtempSync(join(tmpdir(), 'svc-passport-anchor-'));
    writeFileSync(join(dir, 'anchor.key'), `${anchorKey}\n`);
    t = await startTestGateway({
      env: {
        SVC_ANCHOR_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, confirmations: 2 }]),
        SVC_ANCHOR_KEY_FILE: join(dir, 'anchor.key'),
      },
    });
    signer = (await get<{ address: string }>('/v1/receipts/pubkey')).body.address;

    // A: runs of 3 and 2 receipts, one receipt outside any run, and a third run of 2 whose chain is broken below.
    // B: three runs of one receipt. C: two runs of one receipt and six outside any run.
    [A, B, C] = await Promise.all([notaryAccount(t), notaryAccount(t), notaryAccount(t)]);
    for (const [run, n] of [['a1', 3], ['a2', 2], ['a3', 2]] as const) for (let i = 0; i < n; i++) await notarize(A.api, `run-${run}`);
    await notarize(A.api);
    for (const run of ['b1', 'b2', 'b3']) await notarize(B.api, `run-${run}`);
    for (const run of ['c1', 'c2']) await notarize(C.api, `run-${run}`);
    for (let i = 0; i < 6; i++) await notarize(C.api);
    // Stored tampering: the second receipt of run-a3 carries the signature of another receipt. Its run no longer
    // verifies and it no longer counts; the first receipt of run-a3 still does.
    const db = t.gw.database.db;
    const a3 = await db.selectFrom('receipts').select(['id', 'signature']).where('account_id', '=', A.accountId).where('run_id', '=', 'run-a3').orderBy('run_seq').execute();
    await db.updateTable('receipts').set({ signature: a3[0]!.signature }).where('id', '=', a3[1]!.id).execute();
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await chain?.stop();
  });

  it('refuses malformed, reserved and taken handles naming `handle`, and writes nothing', async () => {
    for (const bad of ['ab', 'x'.repeat(33), 'Alpha', '-alpha', 'alpha-', 'al--pha', 'al_pha', 'al pha', 'ålpha']) {
      const e = await expectApiError(mint(A, bad), 400, 'invalid_request');
      expect(e.param, bad).toBe('handle');
    }
    for (const reserved of ['admin', 'api', 'support', 'www', 'root', 'svc', 'proof']) {
      const e = await expectApiError(mint(A, reserved), 400, 'invalid_request');
      expect(e.message).toContain('reserved');
      expect(e.param).toBe('handle');
    }
    expect((await get(`/v1/passport/admin`)).status).toBe(404);
    expect((await get(`/v1/passport/al--pha`)).status).toBe(404);
    const dir = (await get<{ agents: Json[] }>('/v1/passport')).body;
    expect(dir.agents.filter((x) => x.handle.includes(tag))).toEqual([]);
  });

  it('mints from the provable history: verified runs and receipts counted from stored receipts that verify', async () => {
    const a = await mint(A, handles.a);
    expect(a).toMatchObject({ object: 'passport', handle: handles.a, version: 1, verified_runs: 2, receipts: 7, claimed_now: true });
    expect(a.anchor).toMatchObject({ state: 'pending', hash: a.commitment, root: null });
    expect(await mint(B, handles.b)).toMatchObject({ version: 1, verified_runs: 3, receipts: 3 });
    expect(await mint(C, handles.c)).toMatchObject({ version: 1, verified_runs: 2, receipts: 8 });

    // Taken by another account, or a second handle for the same account: 409 naming handle, nothing written.
    let e = await expectApiError(mint(B, handles.a), 409, 'conflict');
    expect(e.param).toBe('handle');
    e = await expectApiError(mint(A, `other-${tag}`), 409, 'conflict');
    expect(e.message).toContain(handles.a);
    expect((await get(`/v1/passport/other-${tag}`)).status).toBe(404);
    expect((await get<Passport>(`/v1/passport/${handles.a}`)).body).toMatchObject({ handle: handles.a, version: 1, commitment: a.commitment });
  });

  it('ranks the directory by verified runs, then receipts', async () => {
    const { status, body } = await get<{ agents: Array<{ handle: string; verified_runs: number; receipts: number; version: number }>; count: number; ordered_by: string }>('/v1/passport');
    expect(status).toBe(200);
    expect(body.count).toBe(body.agents.length);
    expect(body.count).toBeLessThanOrEqual(500);
    expect(body.ordered_by).toMatch(/^verified_runs desc, receipts desc/);
    const ours = body.agents.filter((x) => x.handle.endsWith(tag));
    // B has the most verified runs despite the fewest receipts; C and A tie on runs and C has more receipts.
    expect(ours.map((x) => x.handle)).toEqual([handles.b, handles.c, handles.a]);
    expect(ours.map((x) => [x.verified_runs, x.receipts])).toEqual([[3, 3], [2, 8], [2, 7]]);
    for (let i = 1; i < body.agents.length; i++) {
      const [p, q] = [body.agents[i - 1]!, body.agents[i]!];
      expect(p.verified_runs > q.verified_runs || (p.verified_runs === q.verified_runs && p.receipts >= q.receipts)).toBe(true);
    }
  });

  it('proves offline: the credential recovers to the signer, the commitment and inclusion recompute, and the chain holds the root', async () => {
    const before = (await get<Proof>(`/v1/passport/${handles.a}/proof`)).body;
    expect(before).toMatchObject({ anchor_state: 'pending', batch_root: null, audit_path: [] });
    await t.gw.leader.runAllOnce(); // batch, sign, send: mined, 1 of 2 confirmations
    await chain.mine(1);
    await t.gw.leader.runAllOnce();

    const { status, body: p } = await get<Proof>(`/v1/passport/${handles.a}/proof`);
    expect(status).toBe(200);
    // 1. The signed credential: canonical is the RFC 8785 form of the document; the signature recovers to the published signer.
    expect(p.credential.canonical).toBe(jcs(p.credential.document));
    expect((await recoverMessageAddress({ message: p.credential.canonical, signature: p.credential.signature })).toLowerCase()).toBe(signer.toLowerCase());
    expect(p.credential.signer.toLowerCase()).toBe(signer.toLowerCase());
    const tampered = p.credential.canonical.replace('"receipts":7', '"receipts":70');
    expect((await recoverMessageAddress({ message: tampered, signature: p.credential.signature })).toLowerCase()).not.toBe(signer.toLowerCase());
    // 2. The commitment, from the inputs alone.
    expect(sha(jcs(p.commitment_inputs))).toBe(p.commitment);
    expect(p.commitment_canonical).toBe(jcs(p.commitment_inputs));
    expect(p.credential.document.commitment).toBe(p.commitment);
    // 3. The inputs say what the credential says, and the run heads are the two runs that recompute.
    const doc = p.credential.document;
    expect(p.commitment_inputs).toMatchObject({ handle: handles.a, version: doc.version, account_id: A.accountId, verified_runs: doc.verified_runs, receipts: doc.receipts });
    const runs = (await A.client.request<{ runs: Array<{ id: string; head_hash: string }> }>('GET', '/v1/runs')).runs;
    const heads = runs.filter((r) => r.id !== 'run-a3').map((r) => r.head_hash).sort();
    expect(p.commitment_inputs.run_heads).toEqual(heads);
    expect(p.commitment_inputs.run_heads).toHaveLength(doc.verified_runs);
    // 4. Inclusion: the audit path takes the commitment to the batch root.
    expect(p.anchor_state).toBe('anchored');
    const root = rootFromPath(buf(p.commitment), p.leaf_index!, p.tree_size!, p.audit_path.map(buf));
    expect(root && hex(root)).toBe(p.batch_root);
    expect(rootFromPath(buf(sha('another leaf')), p.leaf_index!, p.tree_size!, p.audit_path.map(buf))).not.toEqual(buf(p.batch_root!));
    // 5. The chain: a transaction from the anchoring account carrying the tag and the root.
    const on = p.anchors.find((x) => x.backend === 'anvil')!;
    expect(on).toMatchObject({ state: 'anchored', chain_id: chain.chainId, from: anchorer.address.toLowerCase() });
    const tx = await chain.pub.getTransaction({ hash: on.tx_hash as Hex });
    expect(tx.from.toLowerCase()).toBe(anchorer.address.toLowerCase());
    expect(tx.input).toBe(`0x7376636101${p.batch_root!.slice(2)}`);
    expect((await chain.pub.getTransactionReceipt({ hash: on.tx_hash as Hex })).status).toBe('success');
    // The lookup carries the same anchor.
    expect((await get<Passport>(`/v1/passport/${handles.a}`)).body.anchor).toMatchObject({ state: 'anchored', root: p.batch_root, hash: p.commitment });
  });

  it('re-mints over fresh history at the same handle; the handle stays the account\'s', async () => {
    await notarize(A.api, 'run-a4');
    await notarize(A.api, 'run-a4');
    const v2 = await mint(A, handles.a);
    expect(v2).toMatchObject({ handle: handles.a, version: 2, verified_runs: 3, receipts: 9, claimed_now: false });
    const v1 = (await get<Proof>(`/v1/passport/${handles.a}/proof`)).body;
    expect(v1.version).toBe(2);
    expect(sha(jcs(v1.commitment_inputs))).toBe(v2.commitment);
    const dir = (await get<{ agents: Array<{ handle: string; version: number; verified_runs: number }> }>('/v1/passport')).body;
    expect(dir.agents.find((x) => x.handle === handles.a)).toMatchObject({ version: 2, verified_runs: 3 });
    // Still nobody else's.
    await expectApiError(mint(C, handles.a), 409, 'conflict');
  });

  it('serves an ERC-8004-shaped registry document that says no registry contract is deployed', async () => {
    const { status, body } = await get<Json>(`/v1/registry/identity/${handles.b}`);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      type: 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1',
      name: handles.b,
      x402Support: false,
      active: true,
      registrations: [],
      supportedTrust: [],
      erc8004: { registry_contract_deployed: false, registered: false },
      passport: { handle: handles.b, verified_runs: 3, receipts: 3 },
    });
    expect(body.erc8004.statement).toMatch(/No ERC-8004 registry contract is deployed/);
    expect(JSON.stringify(body)).not.toMatch(/agentId"|agentRegistry"/);
    expect(body.services.map((s: Json) => s.name)).toEqual(['passport', 'passport-proof']);
    expect(body.services[0].endpoint).toBe(`${t.url}/v1/passport/${handles.b}`);
    expect((await get(`/v1/registry/identity/nobody-${tag}`)).status).toBe(404);
  });

  it('mints KYA credentials bound to your own active key, supersedes in one step, revokes, and shows real states', async () => {
    const keyA = (await A.client.listKeys())[0]!;
    const keyB = (await B.client.listKeys())[0]!;
    const kya = (a: Account, body: Json) => a.client.request<Kya>('POST', '/v1/kya/credentials', { body });
    const list = async (a: Account) => (await a.client.request<{ credentials: Kya[] }>('GET', '/v1/kya/credentials')).credentials;

    // Refusals, each naming its field, none writing anything.
    let e = await expectApiError(kya(A, { handle: handles.a, key_id: keyB.id }), 404, 'not_found');
    expect(e.param).toBe('key_id');
    e = await expectApiError(kya(A, { handle: handles.a, mandate_id: 'mnd_unknown' }), 404, 'not_found');
    expect(e.param).toBe('mandate_id');
    e = await expectApiError(kya(A, { handle: handles.a, key_id: keyA.id, mandate_id: 'mnd_1' }), 400, 'invalid_request');
    expect(e.param).toBe('mandate_id');
    e = await expectApiError(kya(A, { handle: handles.a }), 400, 'invalid_request');
    expect(e.param).toBe('key_id');
    e = await expectApiError(kya(A, { handle: handles.b, key_id: keyA.id }), 403, 'forbidden');
    expect(e.param).toBe('handle');
    e = await expectApiError(kya(A, { handle: `nobody-${tag}`, key_id: keyA.id }), 404, 'not_found');
    expect(e.param).toBe('handle');
    expect(await list(A)).toEqual([]);
    expect((await get(`/v1/kya/public/${handles.a}`)).status).toBe(404);

    // The first credential: signed, with caps, policy hashes, an attestation and the passport's history.
    const capped = await A.client.createKey({ name: 'capped', spend_cap_micro_usd: 250_000, scopes: ['inference'] });
    const first = await kya(A, { handle: handles.a, key_id: capped.id });
    expect(first).toMatchObject({ handle: handles.a, key_id: capped.id, state: 'active', key_state: 'active', superseded_by: null });
    const d1 = first.credential.document;
    expect(d1).toMatchObject({
      type: 'svc.kya_credential',
      handle: handles.a,
      binding: { kind: 'key', key_id: capped.id },
      caps: { spend_cap_micro_usd: 250_000, scopes: ['inference'], all_scopes: false },
      policy_hashes: [],
      verified_history: { passport_version: 2, verified_runs: 3, receipts: 9 },
      supersedes: null,
    });
    expect(first.credential.canonical).toBe(jcs(d1));
    expect((await recoverMessageAddress({ message: first.credential.canonical, signature: first.credential.signature })).toLowerCase()).toBe(signer.toLowerCase());
    expect(d1.attestation.canonical).toBe(jcs({ statement: d1.attestation.statement, type: 'svc.kya_attestation' }));
    expect((await recoverMessageAddress({ message: d1.attestation.canonical, signature: d1.attestation.signature })).toLowerCase()).toBe(signer.toLowerCase());
    expect(d1.attestation.statement).toContain(capped.id);
    const pub1 = await get<Kya>(`/v1/kya/public/${handles.a}`);
    expect(pub1.status).toBe(200);
    expect(pub1.body).toMatchObject({ id: first.id, state: 'active', key_state: 'active' });
    expect((await get<Json>(`/v1/registry/identity/${handles.a}`)).body).toMatchObject({ kya_credential_id: first.id });

    // A second one supersedes the first; the public answer moves to it.
    const second = await kya(A, { handle: handles.a, key_id: keyA.id });
    expect(second.credential.document.supersedes).toBe(first.id);
    expect((await get<Kya>(`/v1/kya/public/${handles.a}`)).body.id).toBe(second.id);
    let mine = await list(A);
    expect(mine.map((c) => [c.id, c.state])).toEqual([[second.id, 'active'], [first.id, 'superseded']]);
    expect(mine[1]!.superseded_by).toBe(second.id);

    // Revoking the key shows in the list at read time; a revoked key cannot be bound again.
    await A.client.revokeKey(capped.id);
    mine = await list(A);
    expect(mine.find((c) => c.id === first.id)).toMatchObject({ state: 'superseded', key_state: 'revoked' });
    e = await expectApiError(kya(A, { handle: handles.a, key_id: capped.id }), 400, 'invalid_request');
    expect(e.param).toBe('key_id');

    // Bound to a mandate: its key, with the mandate's id, purpose and expiry in the signed binding; another
    // account's mandate is unknown; a revoked mandate cannot be bound.
    const expires = new Date(t.clock.now().getTime() + 86_400_000).toISOString();
    const mandate = await A.client.request<{ id: string; key_id: string }>('POST', '/v1/mandates', {
      body: { parent_key_id: keyA.id, purpose: 'buy compute for the weekly report', spend_cap_micro_usd: 100_000, expires_at: expires },
    });
    const byMandate = await kya(A, { handle: handles.a, mandate_id: mandate.id });
    expect(byMandate).toMatchObject({ key_id: mandate.key_id, state: 'active', key_state: 'active' });
    expect(byMandate.credential.document.binding).toEqual({ kind: 'mandate', mandate_id: mandate.id, key_id: mandate.key_id, purpose: 'buy compute for the weekly report', expires_at: expires });
    e = await expectApiError(kya(B, { handle: handles.b, mandate_id: mandate.id }), 404, 'not_found');
    expect(e.param).toBe('mandate_id');
    await A.client.request('DELETE', `/v1/mandates/${mandate.id}`);
    expect((await list(A)).find((c) => c.id === byMandate.id)?.key_state).toBe('revoked');
    e = await expectApiError(kya(A, { handle: handles.a, mandate_id: mandate.id }), 400, 'invalid_request');
    expect(e.param).toBe('mandate_id');
    // A key with a policy: the credential lists the policy's sha256 (as GET /v1/policies shows it).
    const policied = await A.client.request<{ id: string; policy_id: string }>('POST', '/v1/keys', { body: { name: 'policied', policy: { guardrails: [], max_output_tokens: 100 } } });
    const current = await kya(A, { handle: handles.a, key_id: policied.id });
    const policy = ((await A.client.request<{ policies: Array<{ id: string; sha256: string }> }>('GET', '/v1/policies')).policies).find((p) => p.id === policied.policy_id)!;
    expect(current.credential.document.policy_hashes).toEqual([policy.sha256]);

    // Revoking the current credential: revoked in the list, and the handle has none in public.
    await expectApiError(B.client.request('DELETE', `/v1/kya/credentials/${current.id}`), 404, 'not_found');
    const revoked = await A.client.request<Kya>('DELETE', `/v1/kya/credentials/${current.id}`);
    expect(revoked).toMatchObject({ id: current.id, state: 'revoked', key_state: 'active' });
    expect(await A.client.request<Kya>('DELETE', `/v1/kya/credentials/${current.id}`)).toEqual(revoked);
    expect((await list(A)).map((c) => c.state)).toEqual(['revoked', 'superseded', 'superseded', 'superseded']);
    expect((await get(`/v1/kya/public/${handles.a}`)).status).toBe(404);
    expect((await get<Json>(`/v1/registry/identity/${handles.a}`)).body.kya_credential_id).toBeNull();
    await expectApiError(A.client.request('DELETE', '/v1/kya/credentials/kya_unknown'), 404, 'not_found');
  });

  it('answers 404 for unknown handles on every public route', async () => {
    for (const path of [`/v1/passport/zz-${tag}`, `/v1/passport/zz-${tag}/proof`, `/v1/registry/identity/zz-${tag}`, `/v1/kya/public/zz-${tag}`, `/v1/kya/public/${handles.c}`]) {
      const { status, body } = await get<{ error: { type: string } }>(path);
      expect({ path, status, type: body.error.type }).toEqual({ path, status: 404, type: 'not_found' });
    }
  });

  it('lets exactly one of several racing claims of one handle win, and one handle of several raced by one account', async () => {
    const racers = await Promise.all(Array.from({ length: 4 }, () => t.signIn()));
    const handle = `race-${tag}`;
    const results = await Promise.allSettled(racers.map((r) => r.client.request<Passport>('POST', '/v1/passport', { body: { handle } })));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) expect((r as PromiseRejectedResult).reason).toMatchObject({ status: 409, type: 'conflict', param: 'handle' });
    const winner = racers[results.findIndex((r) => r.status === 'fulfilled')]!;
    expect((await get<Proof>(`/v1/passport/${handle}/proof`)).body.commitment_inputs.account_id).toBe(winner.accountId);

    const one = await t.signIn();
    const names = [`solo-${tag}-1`, `solo-${tag}-2`, `solo-${tag}-3`];
    const mine = await Promise.allSettled(names.map((h) => one.client.request<Passport>('POST', '/v1/passport', { body: { handle: h } })));
    expect(mine.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const statuses = await Promise.all(names.map(async (h) => (await get(`/v1/passport/${h}`)).status));
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);

    // KYA mints racing at one handle: each supersedes the one before it, and exactly one stays current.
    const key = (await winner.client.createKey()).id;
    const minted = await Promise.all(Array.from({ length: 3 }, () => winner.client.request<Kya>('POST', '/v1/kya/credentials', { body: { handle, key_id: key } })));
    const listed = (await winner.client.request<{ credentials: Kya[] }>('GET', '/v1/kya/credentials')).credentials;
    expect(listed.map((c) => c.state)).toEqual(['active', 'superseded', 'superseded']);
    expect(new Set(listed.map((c) => c.id))).toEqual(new Set(minted.map((c) => c.id)));
    expect(listed[1]!.superseded_by).toBe(listed[0]!.id);
    expect(listed[2]!.superseded_by).toBe(listed[1]!.id);
    expect((await get<Kya>(`/v1/kya/public/${handle}`)).body.id).toBe(listed[0]!.id);
  });
});
