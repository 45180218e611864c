import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { freePort, startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { notarize, notaryAccount, type ProofBody } from './support/notary.ts';
import { decodeWire, startLocalSolana, type LocalSolana } from './support/solana-rpc.ts';
import { buf, hex, mth, rootFromPath } from './support/merkle.ts';

/**
 * Public anchors end to end on a real local chain (anvil): run proofs and notary receipts are queued, the
 * leader batches them into an RFC 6962 tree and writes the root to every configured chain. The test checks
 * everything from public data alone with its own tree code: the anchor document's leaves recompute to the
 * root, the artifact's audit path takes its hash to that root, and the chain holds a transaction from the
 * anchoring account whose input is the tag and the root.
 */

interface AnchorField {
  state: string;
  hash: string;
  root: string | null;
  leaf_index: number | null;
  tree_size: number | null;
  proof: string[];
  anchors: Array<{ backend: string; chain_id: number; state: string; from: string; tx_hash: string | null; block_number: number | null }>;
}
interface AnchorDoc {
  root: string;
  leaf_count: number;
  leaves: string[];
  state: string;
  anchors: Array<AnchorField['anchors'][number] & { attempts: number; last_error: string | null; verify: string }>;
}

describe('public anchors on a local chain', () => {
  let chain: TestChain;
  let t: TestGateway;
  let downPort: number;
  const anchorKey = generatePrivateKey();
  const anchorer = privateKeyToAccount(anchorKey);

  beforeAll(async () => {
    chain = await startChain();
    await chain.pub.request({ method: 'anvil_setBalance' as never, params: [anchorer.address, '0xde0b6b3a7640000'] as never });
    downPort = await freePort(); // a second chain that is down until the retry test starts it
    const dir = mkdtempSync(join(tmpdir(), 'svc-anchor-'));
    writeFileSync(join(dir, 'anchor.key'), `${anchorKey}\n`);
    t = await startTestGateway({
      env: {
        SVC_ANCHOR_CHAINS: JSON.stringify([
          { name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, confirmations: 2 },
          { name: 'second', chain_id: 31338, rpc_url: `http://127.0.0.1:${downPort}`, confirmations: 1 },
        ]),
        SVC_ANCHOR_KEY_FILE: join(dir, 'anchor.key'),
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await chain?.stop();
  });

  const anchorDoc = async (root: string) => {
    const res = await fetch(`${t.url}/v1/anchors/${root}`); // public: no credential
    expect(res.status).toBe(200);
    return (await res.json()) as AnchorDoc;
  };

  it('anchors a run proof: pending, batched, confirmed; the proof recomputes from public data alone', async () => {
    const a = await notaryAccount(t);
    for (let i = 0; i < 3; i++) await notarize(a.api, 'run-anchored');
    const other = await notarize(a.api); // a notary receipt outside the run: a second leaf in the batch

    const proof1 = await a.client.request<ProofBody>('POST', '/v1/runs/run-anchored/proof');
    const first = proof1.proof.anchor as unknown as AnchorField;
    expect(first).toMatchObject({ state: 'pending', hash: proof1.proof.head_hash, root: null, proof: [] });

    await t.gw.leader.runAllOnce(); // gathers the batch and sends the transaction (mined at once, 1 of 2 confirmations)
    const mid = (await a.client.request<ProofBody>('POST', '/v1/runs/run-anchored/proof')).proof.anchor as unknown as AnchorField;
    expect(mid.state).toBe('pending');
    expect(mid.root).toMatch(/^0x[0-9a-f]{64}$/);
    await chain.mine(1);
    await t.gw.leader.runAllOnce();

    const proof = (await a.client.request<ProofBody>('POST', '/v1/runs/run-anchored/proof')).proof;
    const anchor = proof.anchor as unknown as AnchorField;
    expect(anchor.state).toBe('anchored');
    const onAnvil = anchor.anchors.find((x) => x.backend === 'anvil')!;
    expect(onAnvil).toMatchObject({ state: 'anchored', chain_id: chain.chainId, from: anchorer.address.toLowerCase() });
    expect(anchor.anchors.find((x) => x.backend === 'second')?.state).toBe('failed');

    // From public data alone: the anchor document's leaves make the root; the audit path takes the head hash to it.
    const doc = await anchorDoc(anchor.root!);
    expect(doc.state).toBe('anchored');
    expect(doc.leaves).toContain(proof.head_hash);
    expect(doc.leaves[anchor.leaf_index!]).toBe(proof.head_hash);
    expect(hex(mth(doc.leaves.map(buf)))).toBe(anchor.root);
    expect(doc.leaf_count).toBe(anchor.tree_size);
    const rebuilt = rootFromPath(buf(proof.head_hash), anchor.leaf_index!, anchor.tree_size!, anchor.proof.map(buf));
    expect(rebuilt && hex(rebuilt)).toBe(anchor.root);
    // A wrong index or a tampered path does not recompute.
    expect(rootFromPath(buf(proof.head_hash), (anchor.leaf_index! + 1) % anchor.tree_size!, anchor.tree_size!, anchor.proof.map(buf))).not.toEqual(buf(anchor.root!));

    // The chain holds the root: a transaction from the anchoring account with the tag and root as input.
    const tx = await chain.pub.getTransaction({ hash: onAnvil.tx_hash as Hex });
    expect(tx.from.toLowerCase()).toBe(anchorer.address.toLowerCase());
    expect(tx.input).toBe(`0x7376636101${anchor.root!.slice(2)}`);
    const receipt = await chain.pub.getTransactionReceipt({ hash: onAnvil.tx_hash as Hex });
    expect(receipt.status).toBe('success');
    expect(Number(receipt.blockNumber)).toBe(onAnvil.block_number);

    // The notary receipt outside the run is in the same batch, with its own path.
    const n = await a.api.request<{ anchor: AnchorField; receipt: { hash: string } }>('GET', `/v1/notary/receipts/${other.id}`);
    expect(n.anchor.root).toBe(anchor.root);
    expect(hex(rootFromPath(buf(n.receipt.hash), n.anchor.leaf_index!, n.anchor.tree_size!, n.anchor.proof.map(buf))!)).toBe(anchor.root);

    // The signed proof document carries the anchor as signed.
    expect(proof.anchor).toEqual(anchor);
  });

  it('anchors a sealed call: its commitment recomputes from the public record after reveal and is included under a root on the chain', async () => {
    const a = await notaryAccount(t);
    const c = await a.api.request<{ id: string; commitment: string }>('POST', '/v1/calls/commit', { body: { text: 'the forecast: rain on Tuesday' } });
    await a.api.request('POST', `/v1/calls/commit/${c.id}/reveal`);
    await t.gw.leader.runAllOnce();
    await chain.mine(1);
    await t.gw.leader.runAllOnce();
    // From public data alone: the call's record, the anchor document, and the chain.
    const pub = (await (await fetch(`${t.url}/v1/calls/public/${c.id}`)).json()) as { commitment: string; text: string; salt_hex: string; anchor: AnchorField };
    expect(`0x${createHash('sha256').update(Buffer.concat([buf(pub.salt_hex), Buffer.from(pub.text, 'utf8')])).digest('hex')}`).toBe(pub.commitment);
    expect(pub.anchor.state).toBe('anchored');
    expect(hex(rootFromPath(buf(pub.commitment), pub.anchor.leaf_index!, pub.anchor.tree_size!, pub.anchor.proof.map(buf))!)).toBe(pub.anchor.root);
    const doc = await anchorDoc(pub.anchor.root!);
    expect(hex(mth(doc.leaves.map(buf)))).toBe(pub.anchor.root);
    const onAnvil = doc.anchors.find((x) => x.backend === 'anvil')!;
    expect((await chain.pub.getTransaction({ hash: onAnvil.tx_hash as Hex })).input).toBe(`0x7376636101${pub.anchor.root!.slice(2)}`);
  });

  it('retries a chain that failed, with backoff on the injected clock, until it anchors', async () => {
    const a = await notaryAccount(t);
    const r = await notarize(a.api);
    await t.gw.leader.runAllOnce();
    const root = (await a.api.request<{ anchor: AnchorField }>('GET', `/v1/notary/receipts/${r.id}`)).anchor.root!;
    let doc = await anchorDoc(root);
    const second = () => doc.anchors.find((x) => x.backend === 'second')!;
    expect(second().state).toBe('failed');
    expect(second().attempts).toBe(1);
    expect(second().last_error).toBeTruthy();
    // Not due yet: another pass leaves it alone.
    await t.gw.leader.runAllOnce();
    doc = await anchorDoc(root);
    expect(second().attempts).toBe(1);
    // The chain comes up; after the backoff the next pass sends, and the one after confirms.
    const up = await startChain({ chainId: 31338, port: downPort });
    try {
      await up.pub.request({ method: 'anvil_setBalance' as never, params: [anchorer.address, '0xde0b6b3a7640000'] as never });
      t.clock.advance(30_000);
      await t.gw.leader.runAllOnce();
      await t.gw.leader.runAllOnce();
      doc = await anchorDoc(root);
      expect(second()).toMatchObject({ state: 'anchored', chain_id: 31338 });
      const tx = await up.pub.getTransaction({ hash: second().tx_hash as Hex });
      expect(tx.input).toBe(`0x7376636101${root.slice(2)}`);
    } finally {
      await up.stop();
    }
  });

  it('sends the stored transaction again when the process died between signing and sending: one transaction, no second', async () => {
    const a = await notaryAccount(t);
    const r = await notarize(a.api);
    const anchors = t.gw.anchors;
    const [root] = await anchors.gather();
    expect(root).toBeDefined();
    // What a process does before it dies: the transaction signed and stored, never sent.
    const anvil = anchors.backends.find((c) => c.name === 'anvil')!;
    const nonceBefore = await chain.pub.getTransactionCount({ address: anchorer.address });
    const tx = await anvil.sign(root as Hex);
    await anchors.store.update(root!, 'anvil', { raw_tx: tx.raw, tx_hash: tx.hash, nonce: tx.validity });
    expect(await chain.pub.getTransaction({ hash: tx.hash as Hex }).catch(() => null)).toBeNull();
    // The next leader finds it unknown to the chain and sends that same transaction.
    await t.gw.leader.runAllOnce();
    await chain.mine(1);
    await t.gw.leader.runAllOnce();
    const n = await a.api.request<{ anchor: AnchorField }>('GET', `/v1/notary/receipts/${r.id}`);
    expect(n.anchor.anchors.find((x) => x.backend === 'anvil')).toMatchObject({ state: 'anchored', tx_hash: tx.hash });
    expect(await chain.pub.getTransactionCount({ address: anchorer.address })).toBe(nonceBefore + 1);
  });

  it('answers 400 naming the root for a malformed one and 404 for an unknown one', async () => {
    const bad = await fetch(`${t.url}/v1/anchors/0x1234`);
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain('root');
    const unknown = await fetch(`${t.url}/v1/anchors/0x${'ab'.repeat(32)}`);
    expect(unknown.status).toBe(404);
  });
});

describe('public anchors without a chain', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => t?.close());

  it('still batches (inclusion proofs exist) and says not_anchored', async () => {
    const a = await notaryAccount(t);
    const x = await notarize(a.api);
    const y = await notarize(a.api);
    const before = await a.api.request<{ anchor: AnchorField }>('GET', `/v1/notary/receipts/${x.id}`);
    expect(before.anchor).toMatchObject({ state: 'not_anchored', root: null });
    await t.gw.leader.runAllOnce();
    const after = await a.api.request<{ anchor: AnchorField; receipt: { hash: string } }>('GET', `/v1/notary/receipts/${y.id}`);
    expect(after.anchor.state).toBe('not_anchored');
    expect(after.anchor.tree_size).toBeGreaterThanOrEqual(2);
    expect(hex(rootFromPath(buf(after.receipt.hash), after.anchor.leaf_index!, after.anchor.tree_size!, after.anchor.proof.map(buf))!)).toBe(after.anchor.root);
    const doc = (await (await fetch(`${t.url}/v1/anchors/${after.anchor.root}`)).json()) as AnchorDoc;
    expect(doc).toMatchObject({ state: 'not_anchored', anchors: [] });
  });
});

describe.skipIf(TEST_DB_KIND === 'pglite')('public anchors gathered by two processes at once (Postgres)', () => {
  it('puts every queued hash in exactly one batch', async () => {
    const pair = await startGatewayPair({ env: { SVC_ANCHOR_BATCH_MAX: '7' } });
    try {
      const a = await notaryAccount(pair.a);
      const ids: string[] = [];
      for (let i = 0; i < 40; i++) ids.push((await notarize(a.api)).id);
      const [ra, rb] = await Promise.all([pair.a.gw.anchors.gather(), pair.b.gw.anchors.gather()]);
      expect(new Set([...ra, ...rb]).size).toBe(ra.length + rb.length);
      const fields = await Promise.all(ids.map((id) => a.api.request<{ anchor: AnchorField; receipt: { hash: string } }>('GET', `/v1/notary/receipts/${id}`)));
      const seen = new Map<string, number>();
      for (const f of fields) {
        expect(f.anchor.root).not.toBeNull();
        const doc = (await (await fetch(`${pair.a.url}/v1/anchors/${f.anchor.root}`)).json()) as AnchorDoc;
        expect(doc.leaf_count).toBeLessThanOrEqual(7);
        expect(doc.leaves.filter((h) => h === f.receipt.hash)).toHaveLength(1);
        seen.set(f.receipt.hash, (seen.get(f.receipt.hash) ?? 0) + 1);
      }
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await pair.close();
    }
  });
});

describe('public anchors on Solana (a local JSON-RPC speaking the cluster\'s wire format)', () => {
  let sol: LocalSolana;
  let t: TestGateway;
  let payer: string;
  const rpc = async <T>(method: string, params: unknown[]) => ((await (await fetch(sol.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json()) as { result: T }).result;

  beforeAll(async () => {
    sol = await startLocalSolana();
    // A solana-keygen keypair file: the 32-byte seed, then the 32-byte public key.
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32);
    const pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    const dir = mkdtempSync(join(tmpdir(), 'svc-anchor-sol-'));
    writeFileSync(join(dir, 'id.json'), JSON.stringify([...seed, ...pub]));
    const { getBase58Decoder } = await import('@solana/kit');
    payer = getBase58Decoder().decode(pub);
    t = await startTestGateway({ env: { SVC_ANCHOR_SOLANA: JSON.stringify({ rpc_url: sol.url }), SVC_ANCHOR_SOLANA_KEY_FILE: join(dir, 'id.json') } });
  });
  afterAll(async () => {
    await t?.close();
    await sol?.close();
  });

  it('writes the root as a memo signed by the anchoring keypair, anchored once finalized', async () => {
    const a = await notaryAccount(t);
    const r = await notarize(a.api);
    await t.gw.leader.runAllOnce(); // batch, sign, send: landed, confirmed, not finalized
    let n = await a.api.request<{ anchor: AnchorField; receipt: { hash: string } }>('GET', `/v1/notary/receipts/${r.id}`);
    expect(n.anchor.state).toBe('pending');
    sol.finalize();
    await t.gw.leader.runAllOnce();
    n = await a.api.request<{ anchor: AnchorField; receipt: { hash: string } }>('GET', `/v1/notary/receipts/${r.id}`);
    expect(n.anchor.state).toBe('anchored');
    const on = n.anchor.anchors[0]!;
    expect(on).toMatchObject({ backend: 'solana', type: 'solana', chain_id: 0, state: 'anchored', from: payer });
    expect(hex(rootFromPath(buf(n.receipt.hash), n.anchor.leaf_index!, n.anchor.tree_size!, n.anchor.proof.map(buf))!)).toBe(n.anchor.root);

    // From the cluster alone: the transaction's fee payer and its Memo-program instruction carrying the root.
    const got = await rpc<{ slot: number; transaction: [string, string] }>('getTransaction', [on.tx_hash, { encoding: 'base64' }]);
    expect(got.slot).toBe(on.block_number);
    const { message } = decodeWire(Buffer.from(got.transaction[0], 'base64'));
    expect(message.staticAccounts[0]).toBe(payer);
    expect(message.version).toBe('legacy');
    const instructions = 'instructions' in message ? message.instructions : [];
    const memo = instructions.find((i) => message.staticAccounts[i.programAddressIndex] === 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
    expect(Buffer.from(memo!.data!).toString('utf8')).toBe(`svc-anchor:v1:${n.anchor.root!.slice(2)}`);
    const doc = (await (await fetch(`${t.url}/v1/anchors/${n.anchor.root}`)).json()) as AnchorDoc;
    expect(doc.anchors[0]!.verify).toContain('Memo program');
  });

  it('signs again when the stored transaction\'s blockhash expired before it landed', async () => {
    const a = await notaryAccount(t);
    const r = await notarize(a.api);
    const [root] = await t.gw.anchors.gather();
    const backend = t.gw.anchors.backends[0]!;
    const stale = await backend.sign(root as Hex); // signed and stored, then the process died
    await t.gw.anchors.store.update(root!, 'solana', { raw_tx: stale.raw, tx_hash: stale.hash, nonce: stale.validity });
    sol.advance(200); // past the blockhash's last valid height
    await t.gw.leader.runAllOnce();
    let doc = (await (await fetch(`${t.url}/v1/anchors/${root}`)).json()) as AnchorDoc;
    expect(doc.anchors[0]).toMatchObject({ state: 'failed', attempts: 1 });
    expect(doc.anchors[0]!.last_error).toMatch(/blockhash/);
    t.clock.advance(30_000);
    await t.gw.leader.runAllOnce(); // a new transaction, signed with a fresh blockhash
    sol.finalize();
    await t.gw.leader.runAllOnce();
    doc = (await (await fetch(`${t.url}/v1/anchors/${root}`)).json()) as AnchorDoc;
    expect(doc.anchors[0]!.state).toBe('anchored');
    expect(doc.anchors[0]!.tx_hash).not.toBe(stale.hash);
    expect(sol.landed.has(stale.hash)).toBe(false);
    const n = await a.api.request<{ anchor: AnchorField }>('GET', `/v1/notary/receipts/${r.id}`);
    expect(n.anchor.state).toBe('anchored');
  });
});
