import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway } from './support/gateway.ts';

/**
 * The negative answer of POST /v1/matches is uniform: for an unknown intent id, another account's intent, an
 * intent of yours that is withdrawn, and a resting intent of yours for which no counterparty crosses (while two
 * hundred intents of the other side rest, each opened and compared), the status, headers and body bytes are
 * the same, and the time to answer is drawn from one distribution. Timings are taken interleaved (one request of
 * each case per round, in rotating order, so the machine's load falls on every case alike) and each case is
 * compared with the unknown-id case by a two-sample Kolmogorov-Smirnov test.
 */

const FLOOR_MS = 150;
const ROUNDS = 24;

let t: Awaited<ReturnType<typeof startTestGateway>>;
const cases = new Map<string, string>(); // case -> intent id
let token: string;

beforeAll(async () => {
  // The dark pool needs a cash-leg chain; this test never settles, so nothing answers at that address.
  const chains = JSON.stringify([{ name: 'local', chain_id: 31337, rpc_url: 'http://127.0.0.1:9', usdt: `0x${'2'.repeat(40)}`, decimals: 6, confirmations: 1 }]);
  t = await startTestGateway({ env: { SVC_CHAINS: chains, SVC_DARKPOOL_ENABLED: 'true', SVC_DARKPOOL_MATCH_FLOOR_MS: String(FLOOR_MS) } });
  const me = await t.signIn();
  token = me.token;
  const addr = me.account.address;
  const post = (c: typeof me.client, body: Record<string, unknown>) => c.request<{ id: string }>('POST', '/v1/intents', { body: { settlement_address: addr, ...body } });
  // Two hundred sells far above any bid of this test, from four other accounts.
  let other: { id: string } | undefined;
  for (let a = 0; a < 4; a++) {
    const s = await t.signIn();
    for (let i = 0; i < 50; i++) other = await post(s.client, { asset_id: 'ZETA', side: 'sell', size: 5, limit_price_micro_usd: 1_000_000 + i });
  }
  const resting = await post(me.client, { asset_id: 'ZETA', side: 'buy', size: 5, limit_price_micro_usd: 1 });
  const withdrawn = await post(me.client, { asset_id: 'ZETA', side: 'buy', size: 5, limit_price_micro_usd: 1 });
  await me.client.request('POST', `/v1/intents/${withdrawn.id}/cancel`);
  cases.set('unknown id', `int_${randomBytes(12).toString('hex')}`);
  cases.set("another account's intent", other!.id);
  cases.set('your withdrawn intent', withdrawn.id);
  cases.set('no counterparty crosses (200 scanned)', resting.id);
}, 180_000);
afterAll(async () => t?.close());

async function askRaw(intentId: string) {
  const start = performance.now();
  const res = await fetch(`${t.url}/v1/matches`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ intent_id: intentId }) });
  const body = Buffer.from(await res.arrayBuffer());
  const ms = performance.now() - start;
  const headers = Object.fromEntries([...res.headers].filter(([k]) => !['date', 'x-request-id'].includes(k)));
  return { status: res.status, headers, body, ms };
}

/** The two-sample Kolmogorov-Smirnov statistic: the largest gap between the two empirical distribution functions. */
function ks(a: number[], b: number[]): number {
  const xs = [...new Set([...a, ...b])].sort((x, y) => x - y);
  const cdf = (s: number[], x: number) => s.filter((v) => v <= x).length / s.length;
  return Math.max(...xs.map((x) => Math.abs(cdf(a, x) - cdf(b, x))));
}

describe('the negative match answer', () => {
  it('is byte-identical, and its timing indistinguishable, whatever the reason', async () => {
    const names = [...cases.keys()];
    const times = new Map(names.map((n) => [n, [] as number[]]));
    const answers = new Map<string, Awaited<ReturnType<typeof askRaw>>>();
    for (const n of names) await askRaw(cases.get(n)!); // warm every path once
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < names.length; k++) {
        const n = names[(round + k) % names.length]!;
        const a = await askRaw(cases.get(n)!);
        times.get(n)!.push(a.ms);
        answers.set(n, a);
      }
    }
    const ref = answers.get('unknown id')!;
    expect(ref.status).toBe(200);
    expect(ref.body.toString()).toBe('{"object":"match_result","matched":false,"match":null}');
    for (const n of names) {
      const a = answers.get(n)!;
      expect(a.status, n).toBe(ref.status);
      expect(a.headers, n).toEqual(ref.headers);
      expect(a.body.equals(ref.body), n).toBe(true);
    }
    // Kolmogorov-Smirnov at a 0.1% level: the critical gap for two samples of n is 1.95 * sqrt(2 / n).
    const critical = 1.95 * Math.sqrt(2 / ROUNDS);
    const summary = names.map((n) => {
      const xs = [...times.get(n)!].sort((x, y) => x - y);
      return `${n}: median ${xs[xs.length >> 1]!.toFixed(1)} ms, KS ${ks(times.get('unknown id')!, xs).toFixed(2)}`;
    });
    console.log(`negative answers (floor ${FLOOR_MS} ms, critical KS ${critical.toFixed(2)}):\n  ${summary.join('\n  ')}`);
    for (const n of names) expect(ks(times.get('unknown id')!, times.get(n)!), `${n}: ${summary.join('; ')}`).toBeLessThan(critical);
    for (const n of names) expect(Math.min(...times.get(n)!), n).toBeGreaterThanOrEqual(FLOOR_MS - 1);
  }, 120_000);
});
