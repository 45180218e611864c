import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { deployEip3009Token, type Eip3009Token } from './support/eip3009.ts';
import { x402Buyer } from './support/x402-buyer.ts';

/**
 * A service that is a hosted agent, end to end: anvil and an EIP-3009 token for the payment, a real svc-node
 * agent and Docker for the run. The buyer pays with the stock x402 client; the agent runs through the agents
 * module's run path under its own key (metered on the seller's account), with the request body as SVC_INPUT
 * and its stdout as the answer.
 */
const enabled = sandboxImage();
const PRICE = 100_000;

let chain: TestChain;
let token: Eip3009Token;
let t: TestGateway;
let node: TestAgent;
let seller: Awaited<ReturnType<TestGateway['signIn']>>;

beforeAll(async () => {
  if (!enabled) return;
  chain = await startChain({ chainId: 84532 });
  token = await deployEip3009Token(chain);
  const key = generatePrivateKey();
  await chain.pub.request({ method: 'anvil_setBalance' as never, params: [privateKeyToAccount(key).address, '0xde0b6b3a7640000'] as never });
  const dir = mkdtempSync(join(tmpdir(), 'svc-market-agent-'));
  writeFileSync(join(dir, 'facilitator.key'), key);
  t = await startTestGateway({
    env: {
      SVC_CHAINS: JSON.stringify([{ name: 'local', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 }]),
      SVC_MARKET_X402: JSON.stringify({ name: 'USD Coin', version: '2' }),
      SVC_MARKET_FACILITATOR_KEY_FILE: join(dir, 'facilitator.key'),
      SVC_SANDBOX_MEMORY_MB: '64',
      SVC_SANDBOX_PIDS: '64',
    },
  });
  seller = await t.signIn();
  await t.gw.services.metering.credit(seller.accountId, 100_000_000, 'grant', 'service-agent-tests');
  node = await enrollAgent(t, seller.client, { kinds: ['sandbox'] });
  node.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until('sandbox agent connected', async () => t.gw.fleet.hub.isConnected(node.nodeId) && (await t.gw.fleet.registry.get(node.nodeId)).last_heartbeat_at !== null, 60_000);
}, 180_000);
afterAll(async () => {
  await node?.kill('SIGTERM');
  await t?.close();
  await chain?.stop();
});

const deploy = (code: string) => seller.client.request<{ id: string; key: { id: string } }>('POST', '/v1/agents', { body: { name: 'svc', language: 'sh', code } });
const publish = (slug: string, agentId: string) =>
  seller.client.request<any>('POST', '/v1/services', { body: { slug, kind: 'agent', agent_id: agentId, price_micro_usd: PRICE, payee: seller.account.address, description: 'agent' } });
async function buyer() {
  const w = await chain.newWallet();
  await token.mint(w.address, 1_000_000n);
  return { account: w, ...x402Buyer(w) };
}
const call = (b: Awaited<ReturnType<typeof buyer>>, slug: string, body: unknown) =>
  b.fetch(`${t.url}/v1/services/${slug}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe.skipIf(!enabled)('a hosted agent sold as a service', () => {
  it('is paid buyer to seller, then run with the body as SVC_INPUT; its stdout is the answer', async () => {
    const a = await deploy(`printf '{"got":%s,"trigger":"%s"}' "$SVC_INPUT" "$SVC_TRIGGER"`);
    await publish('agent-echo', a.id);
    const b = await buyer();
    const res = await call(b, 'agent-echo', { text: 'hi' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body).toMatchObject({ status: 'delivered', result: { got: { text: 'hi' }, trigger: 'manual' }, result_content_type: 'application/json' });
    expect(body.receipt.payload.agent_run_id).toMatch(/^arun_/);
    expect(await token.balanceOf(b.account.address)).toBe(1_000_000n - BigInt(PRICE));
    expect(await token.balanceOf(seller.account.address)).toBe(BigInt(PRICE));
    const runs = await seller.client.request<any>('GET', `/v1/agents/${a.id}/runs`);
    expect(runs.runs[0]).toMatchObject({ id: body.receipt.payload.agent_run_id, status: 'succeeded' });
  });

  it('a run that fails after payment is answered 502 and recorded; a disabled agent is refused before any payment', async () => {
    const a = await deploy('echo broken >&2; exit 4');
    await publish('agent-broken', a.id);
    const b = await buyer();
    const res = await call(b, 'agent-broken', {});
    expect(res.status).toBe(502);
    const body = (await res.json()) as any;
    expect(body.error).toMatchObject({ type: 'upstream_error', reason: 'agent_failed' });
    expect(body.error.payment.tx_hash).toMatch(/^0x/);
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/agent-broken/calls');
    expect(calls.calls[0]).toMatchObject({ status: 'failed', error: { type: 'agent_failed' } });

    await seller.client.request('POST', `/v1/agents/${a.id}/gate`, { body: { enabled: false } });
    const before = await token.balanceOf(b.account.address);
    const off = await call(b, 'agent-broken', {});
    expect(off.status).toBe(409);
    expect(((await off.json()) as any).error.reason).toBe('agent_unavailable');
    expect(await token.balanceOf(b.account.address)).toBe(before);
  });
});
