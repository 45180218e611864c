import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeAbiParameters, hexToBigInt, keccak256, recoverMessageAddress, type Hex } from 'viem';
import { canonicalize } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/call.ts';
import { WebhookReceiver, verifyDelivery } from './support/webhook-receiver.ts';

/**
 * Attestations end to end on a local anvil chain with an ERC-20 the test deploys: a check VERIFIED, the
 * supply changed on chain and the refresh DISCREPANCY with a signed webhook, the record reproduced byte for
 * byte from its stored evidence and fresh reads at the pinned block, STALE past the freshness window, the
 * unattributed public verification and its uniform 404s, bad input refused with nothing written or charged,
 * and unreachable sources recorded as UNAVAILABLE at the same price.
 */

const PRICE = 5_000;
const SUPPLY = 1_000_000_000n;
let chain: TestChain;
let token: TestToken;
let other: TestToken;
let t: TestGateway;
let receiver: WebhookReceiver;
let figures: Server;
let figuresUrl: string;
let reserveFigure = '2500000.75';
let signer: string;
const treasury = '0x000000000000000000000000000000000000bEEF';

beforeAll(async () => {
  chain = await startChain();
  token = await deployToken(chain, 'Proof Dollar', 'PUSD');
  other = await deployToken(chain, 'Other Dollar', 'ODOL');
  await token.mint(treasury, SUPPLY);
  const deadPort = await freePort();
  figures = createServer((req, res) => {
    if (req.url === '/reserves.json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ attested: { total: reserveFigure, currency: 'USD' } }));
    else res.writeHead(404).end();
  });
  const figuresPort = await freePort();
  await new Promise<void>((r) => figures.listen(figuresPort, '127.0.0.1', r));
  figuresUrl = `http://127.0.0.1:${figuresPort}/reserves.json`;
  t = await startTestGateway({
    env: {
      SVC_CHAINS: JSON.stringify([
        { name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 },
        { name: 'dead', chain_id: 10, rpc_url: `http://127.0.0.1:${deadPort}`, usdt: token.address, decimals: 6, confirmations: 1 },
        { name: 'mislabelled', chain_id: 8453, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 },
      ]),
      SVC_ATTESTATION_PRICE_MICRO_USD: String(PRICE),
      SVC_ATTESTATION_FRESHNESS_SECONDS: '600',
    },
  });
  receiver = await WebhookReceiver.open('/hooks/attestations');
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
  figures?.closeAllConnections();
  figures?.close();
  await chain?.stop();
});

async function account() {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['proofs'] });
  return { ...s, keyId: key.id, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}
const balance = async (a: { client: SvcClient }) => (await call(a.client, 'GET', '/v1/billing/balance')).body.balance_micro_usd as number;
const sha256 = (b: Buffer | string) => `0x${createHash('sha256').update(b).digest('hex')}`;
const enc = encodeURIComponent;

/** Sends a JSON-RPC request body exactly as recorded and returns the bytes the node answers. */
async function rpcBytes(body: string): Promise<Buffer> {
  const res = await fetch(chain.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return Buffer.from(await res.arrayBuffer());
}

describe('attestations of an ERC-20 on anvil', () => {
  let a: Awaited<ReturnType<typeof account>>;
  let hook: { secret: string };
  let v1: any;
  let v2: any;
  let assetId: string;
  let codeHash: string;

  it('checks the token: VERIFIED at a pinned block, signed, metered, a signed attestation.verified webhook', async () => {
    a = await account();
    const h = await call(a.client, 'POST', '/v1/webhooks', { url: receiver.url, events: ['attestation.verified', 'attestation.discrepancy', 'attestation.unavailable', 'attestation.changed'] });
    expect(h.status, JSON.stringify(h.body)).toBe(201);
    hook = h.body;
    codeHash = keccak256((await chain.pub.getCode({ address: token.address }))!);
    const before = await balance(a);
    const res = await a.api.raw('POST', '/v1/attestations/check', {
      body: {
        subject: { chain: 'anvil', address: token.address },
        claims: { code_hash: codeHash, name: 'Proof Dollar', symbol: 'PUSD', decimals: 6, total_supply: SUPPLY.toString() },
        reserves: [{ label: 'treasury', address: treasury, claimed_balance: SUPPLY.toString() }],
      },
    });
    v1 = await res.json();
    expect(res.status, JSON.stringify(v1)).toBe(201);
    assetId = `eip155:${chain.chainId}:${token.address.toLowerCase()}`;
    const head = Number(await chain.blockNumber());
    expect(v1).toMatchObject({ object: 'attestation', asset_id: assetId, version: 1, status: 'VERIFIED', status_at_check: 'VERIFIED', discrepancies: [], unavailable: [], public_inputs: true, supersedes: null, freshness_seconds: 600 });
    expect(v1.block.number).toBe(head); // confirmations 1: the head itself
    expect(v1.readings.map((r: any) => r.name)).toEqual(['chain_id', 'chain_head', 'block', 'code_hash', 'name', 'symbol', 'decimals', 'total_supply', 'reserve:treasury']);
    expect(v1.readings.find((r: any) => r.name === 'total_supply')).toMatchObject({ value: SUPPLY.toString(), claimed: SUPPLY.toString(), check: 'equals', matches: true, outcome: 'read', pinned: true });
    expect(v1.readings.find((r: any) => r.name === 'code_hash').value).toBe(codeHash);
    // Signed: EIP-191 over the canonical document, by the gateway's receipt signer; no account in it.
    expect((await recoverMessageAddress({ message: v1.record.canonical, signature: v1.record.signature })).toLowerCase()).toBe(signer.toLowerCase());
    expect(v1.record.sha256).toBe(sha256(v1.record.canonical));
    expect(v1.record.canonical).not.toContain(a.accountId);
    // Metered: the receipt headers, the price charged.
    expect(Number(res.headers.get('x-svc-cost-micro-usd'))).toBe(PRICE);
    expect(res.headers.get('x-svc-receipt-id')).toBe(v1.receipt_id);
    expect(await balance(a)).toBe(before - PRICE);
    const receipt = await call(a.client, 'GET', `/v1/receipts/${v1.receipt_id}`);
    expect(receipt.body.payload).toMatchObject({ kind: 'attestation', cost_micro_usd: PRICE, detail: { asset_id: assetId, record_id: v1.id, version: 1, status: 'VERIFIED' } });

    await t.gw.leader.runAllOnce();
    expect(receiver.hits).toHaveLength(1);
    const event = verifyDelivery(hook.secret, receiver.hits[0]!, t.clock.now());
    expect(event).toMatchObject({ type: 'attestation.verified', account_id: a.accountId, data: { asset_id: assetId, record_id: v1.id, version: 1, status: 'VERIFIED', previous_status: null } });
  });

  it('refresh after the supply changed on chain: DISCREPANCY, a new version superseding the first, a signed attestation.discrepancy webhook', async () => {
    await token.mint(chain.accounts[3]!.address, 5_000_000n);
    const res = await a.api.raw('POST', `/v1/attestations/${enc(assetId)}/refresh`, { body: {} });
    v2 = await res.json();
    expect(res.status, JSON.stringify(v2)).toBe(201);
    expect(Number(res.headers.get('x-svc-cost-micro-usd'))).toBe(PRICE);
    expect(v2).toMatchObject({ version: 2, status: 'DISCREPANCY', status_at_check: 'DISCREPANCY', discrepancies: ['total_supply'], supersedes: v1.id });
    expect(v2.readings.find((r: any) => r.name === 'total_supply')).toMatchObject({ value: (SUPPLY + 5_000_000n).toString(), claimed: SUPPLY.toString(), matches: false });
    expect(v2.readings.find((r: any) => r.name === 'reserve:treasury')).toMatchObject({ matches: true });
    expect(JSON.parse(v2.record.canonical)).toMatchObject({ supersedes: v1.id, previous_sha256: v1.record.sha256, version: 2 });

    await t.gw.leader.runAllOnce();
    expect(receiver.hits).toHaveLength(2);
    const event = verifyDelivery(hook.secret, receiver.hits[1]!, t.clock.now());
    expect(event).toMatchObject({ type: 'attestation.discrepancy', data: { asset_id: assetId, record_id: v2.id, version: 2, status: 'DISCREPANCY', previous_status: 'VERIFIED', previous_record_id: v1.id, discrepancies: ['total_supply'], changed: ['total_supply'] } });

    // The prior version is kept as signed; history lists both, newest first.
    const hist = await call(a.api, 'GET', `/v1/attestations/${enc(assetId)}/history`);
    expect(hist.status).toBe(200);
    expect(Object.keys(hist.body).sort()).toEqual(['asset_id', 'disclaimer', 'note', 'subject_ref', 'versions']);
    expect(hist.body).toMatchObject({ asset_id: assetId, subject_ref: assetId });
    expect(hist.body.versions.map((v: any) => v.version)).toEqual([2, 1]);
    expect(hist.body.versions[1].record.canonical).toBe(v1.record.canonical);
    expect((await call(a.api, 'GET', `/v1/attestations/${enc(assetId)}/history?limit=1`)).body.versions).toHaveLength(1);
  });

  it('reproduces the record byte for byte from its stored evidence and fresh reads at the pinned block', async () => {
    await token.mint(chain.accounts[4]!.address, 7n); // the chain moves on; the pinned block does not
    const ev = await call(a.api, 'GET', `/v1/attestations/${enc(assetId)}/evidence?include_body=true&version=2`);
    expect(ev.status).toBe(200);
    const doc = JSON.parse(v2.record.canonical);
    const tag = `0x${doc.block.number.toString(16)}`;
    const derived: Record<string, string | number> = {};
    const readings = [];
    for (const [i, r] of (doc.readings as any[]).entries()) {
      const e = ev.body.readings[i];
      const stored = Buffer.from(e.body_base64, 'base64');
      expect(sha256(stored)).toBe(r.sha256);
      expect(stored.length).toBe(r.bytes);
      let bytes: Buffer = stored;
      if (r.pinned || r.name === 'chain_id') {
        if (r.pinned) expect(r.request).toContain(tag);
        bytes = await rpcBytes(r.request);
        expect(bytes.equals(stored), `${r.name}: the node answers other bytes at the pinned block`).toBe(true);
      }
      const result = JSON.parse(bytes.toString('utf8')).result;
      const value = (() => {
        switch (r.name) {
          case 'chain_id':
          case 'chain_head':
            return Number(hexToBigInt(result));
          case 'block':
            return result.hash;
          case 'code_hash':
            return keccak256(result);
          case 'name':
          case 'symbol':
            return decodeAbiParameters([{ type: 'string' }], result)[0];
          case 'decimals':
            return Number(hexToBigInt(result));
          default:
            return hexToBigInt(result).toString();
        }
      })();
      derived[r.name] = value;
      readings.push({ ...r, value, sha256: sha256(bytes), bytes: bytes.length, matches: r.claimed === null ? null : String(value) === String(r.claimed) });
    }
    expect(derived.total_supply).toBe((SUPPLY + 5_000_000n).toString());
    const discrepancies = readings.filter((r) => r.matches === false).map((r) => r.name);
    const rebuilt = { ...doc, readings, discrepancies, status: discrepancies.length ? 'DISCREPANCY' : 'VERIFIED' };
    expect(canonicalize(rebuilt)).toBe(v2.record.canonical);
    expect((await recoverMessageAddress({ message: canonicalize(rebuilt), signature: v2.record.signature as Hex })).toLowerCase()).toBe(signer.toLowerCase());

    // Without include_body: references only.
    const refs = await call(a.api, 'GET', `/v1/attestations/${enc(assetId)}/evidence`);
    expect(refs.body).toMatchObject({ record_id: v2.id, version: 2 });
    expect(refs.body.readings[0].body_base64).toBeUndefined();
    expect(refs.body.readings[0].source).toBe(`eip155:${chain.chainId}`);
  });

  it('reports STALE once the freshness window has passed; status_at_check keeps the finding', async () => {
    t.clock.advance(601_000);
    const cur = await call(a.api, 'GET', `/v1/attestations/${enc(assetId)}`);
    expect(cur.status).toBe(200);
    expect(cur.body).toMatchObject({ id: v2.id, status: 'STALE', status_at_check: 'DISCREPANCY' });
    expect(cur.body.record.canonical).toBe(v2.record.canonical);
  });

  it('serves the newest on-chain-only record publicly, unattributed; other assets answer one uniform 404', async () => {
    const pub = await fetch(`${t.url}/v1/assets/${enc(assetId)}/verification`);
    expect(pub.status).toBe(200);
    const text = await pub.text();
    expect(text).not.toContain(a.accountId);
    expect(text).not.toContain(a.keyId);
    const body = JSON.parse(text);
    expect(body).toMatchObject({ object: 'asset_verification', asset_id: assetId, status: 'STALE', status_at_check: 'DISCREPANCY', record: { canonical: v2.record.canonical, signature: v2.record.signature } });
    expect(body.receipt_id).toBeUndefined();

    // An asset attested only with an HTTPS reserve figure (an issuer declaration): not public.
    const b = await account();
    const https = await call(b.api, 'POST', '/v1/attestations/check', {
      subject: { chain: `eip155:${chain.chainId}`, address: other.address },
      reserve_source: { url: figuresUrl, json_pointer: '/attested/total', claimed_figure: '2500000.750' },
    });
    expect(https.status, JSON.stringify(https.body)).toBe(201);
    expect(https.body).toMatchObject({ status: 'VERIFIED', public_inputs: false });
    expect(https.body.readings.at(-1)).toMatchObject({ name: 'reserve_figure', kind: 'https', value: '2500000.75', matches: true });
    const otherId = `eip155:${chain.chainId}:${other.address.toLowerCase()}`;
    const hidden = await fetch(`${t.url}/v1/assets/${enc(otherId)}/verification`);
    const unknown = await fetch(`${t.url}/v1/assets/${enc(`eip155:1:0x${'ab'.repeat(20)}`)}/verification`);
    expect(hidden.status).toBe(404);
    expect(unknown.status).toBe(404);
    const strip = (x: any) => ({ ...x, error: { ...x.error, request_id: undefined } });
    expect(strip(await hidden.json())).toEqual(strip(await unknown.json()));

    // The figure moves: refresh finds the discrepancy.
    reserveFigure = '2400000';
    const r2 = await call(b.api, 'POST', `/v1/attestations/${enc(otherId)}/refresh`, {});
    expect(r2.body).toMatchObject({ version: 2, status: 'DISCREPANCY', discrepancies: ['reserve_figure'] });
    // Another tenant's record of an asset is not yours.
    expect((await call(a.api, 'GET', `/v1/attestations/${enc(otherId)}`)).status).toBe(404);
  });

  it('refuses bad input with a 4xx naming the field: nothing written, nothing charged', async () => {
    const c = await account();
    const before = await balance(c);
    const unknownChain = await call(c.api, 'POST', '/v1/attestations/check', { subject: { chain: 'nowhere', address: token.address } });
    expect(unknownChain.status).toBe(400);
    expect(unknownChain.body.error).toMatchObject({ type: 'invalid_request', param: 'subject.chain' });
    const wallet = chain.accounts[5]!.address;
    const noCode = await call(c.api, 'POST', '/v1/attestations/check', { subject: { chain: 'anvil', address: wallet } });
    expect(noCode.status, JSON.stringify(noCode.body)).toBe(400);
    expect(noCode.body.error).toMatchObject({ type: 'invalid_request', param: 'subject.address' });
    const ahead = await call(c.api, 'POST', '/v1/attestations/check', { subject: { chain: 'anvil', address: token.address }, block_number: 10_000_000 });
    expect(ahead.status).toBe(400);
    expect(ahead.body.error.param).toBe('block_number');
    const badUrl = await call(c.api, 'POST', '/v1/attestations/check', { subject: { chain: 'anvil', address: token.address }, reserve_source: { url: 'ftp://example.com/x' } });
    expect(badUrl.body.error).toMatchObject({ type: 'invalid_request', param: 'reserve_source.url' });
    const badClaim = await call(c.api, 'POST', '/v1/attestations/check', { subject: { chain: 'anvil', address: token.address }, claims: { total_supply: '1.5' } });
    expect(badClaim.body.error).toMatchObject({ type: 'invalid_request', param: 'claims.total_supply' });
    expect(await balance(c)).toBe(before);
    const rows = await t.gw.database.db.selectFrom('attestation_records').select('id').where('account_id', '=', c.accountId).execute();
    expect(rows).toEqual([]);
    expect((await call(c.api, 'GET', `/v1/attestations/${enc(`eip155:${chain.chainId}:${wallet.toLowerCase()}`)}`)).status).toBe(404);
    expect((await call(c.api, 'POST', `/v1/attestations/${enc(assetId)}/refresh`, {})).status).toBe(404);
  });

  it('records an unreachable or mislabelled node, or an unreachable HTTPS source, as UNAVAILABLE at the same price', async () => {
    const d = await account();
    const before = await balance(d);
    const dead = await d.api.raw('POST', '/v1/attestations/check', { body: { subject: { chain: 'dead', address: token.address }, claims: { total_supply: '1' } } });
    const deadBody: any = await dead.json();
    expect(dead.status, JSON.stringify(deadBody)).toBe(201);
    expect(deadBody).toMatchObject({ status: 'UNAVAILABLE', public_inputs: false, asset_id: `eip155:10:${token.address.toLowerCase()}` });
    expect(deadBody.readings[0]).toMatchObject({ name: 'chain_id', outcome: 'unavailable', sha256: null });
    expect(deadBody.unavailable).toEqual(expect.arrayContaining(['chain_id', 'code_hash', 'total_supply']));
    expect(Number(dead.headers.get('x-svc-cost-micro-usd'))).toBe(PRICE);

    const mislabelled = await call(d.api, 'POST', '/v1/attestations/check', { subject: { chain: 'mislabelled', address: token.address } });
    expect(mislabelled.body).toMatchObject({ status: 'UNAVAILABLE' });
    expect(mislabelled.body.readings[0].error).toContain(`serves chain id ${chain.chainId}, not 8453`);

    const figureDown = await call(d.api, 'POST', '/v1/attestations/check', {
      subject: { chain: 'anvil', address: token.address },
      reserve_source: { url: `http://127.0.0.1:${await freePort()}/r.json`, claimed_figure: '1' },
    });
    expect(figureDown.body).toMatchObject({ status: 'UNAVAILABLE', unavailable: ['reserve_figure'] });
    expect(await balance(d)).toBe(before - 3 * PRICE);
  });
});
