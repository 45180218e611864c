/**
 * Dark pool bench: what a negative answer of POST /v1/matches costs, and what the answer floor hides. Two
 * negative questions are timed interleaved in one run: an unknown intent id (one lookup, nothing opened) and a
 * resting intent for which no counterparty crosses while --scanned intents of the other side rest (each
 * opened and compared). First with the floor off (the raw difference a caller could measure), then with the
 * floor on (--floor ms). Prints p50 and p95 of each, the ratio of the two p50s, and the two-sample
 * Kolmogorov-Smirnov statistic of the two sets of times beside its critical value at the 0.1% level (below it,
 * the two distributions cannot be told apart from these samples).
 *   npx tsx bench/darkpool.ts [--rounds 40] [--scanned 400] [--floor 150]
 */
import { performance } from 'node:perf_hooks';
import { startTestGateway } from '../test/support/gateway.ts';
import { percentile } from './load.ts';
import { arg } from './args.ts';

const ROUNDS = Number(arg('rounds', '40'));
const SCANNED = Number(arg('scanned', '400'));
const FLOOR = Number(arg('floor', '150'));

/** The two-sample Kolmogorov-Smirnov statistic: the largest gap between the two empirical distribution functions. */
function ks(a: number[], b: number[]): number {
  const xs = [...new Set([...a, ...b])].sort((x, y) => x - y);
  const cdf = (s: number[], x: number) => s.filter((v) => v <= x).length / s.length;
  return Math.max(...xs.map((x) => Math.abs(cdf(a, x) - cdf(b, x))));
}

async function main() {
  const chains = JSON.stringify([{ name: 'local', chain_id: 31337, rpc_url: 'http://127.0.0.1:9', usdt: `0x${'2'.repeat(40)}`, decimals: 6, confirmations: 1 }]);
  const t = await startTestGateway({ env: { SVC_CHAINS: chains, SVC_DARKPOOL_ENABLED: 'true', SVC_DARKPOOL_MATCH_FLOOR_MS: '0', SVC_DARKPOOL_MAX_RESTING: '10000' } });
  try {
    const me = await t.signIn();
    const other = await t.signIn();
    const body = (side: string, limit: number) => ({ asset_id: 'ZETA', side, size: 5, limit_price_micro_usd: limit, settlement_address: me.account.address });
    for (let i = 0; i < SCANNED; i++) await other.client.request('POST', '/v1/intents', { body: body('sell', 1_000_000 + i) });
    const resting = await me.client.request<{ id: string }>('POST', '/v1/intents', { body: body('buy', 1) });
    const ask = async (id: string) => {
      const start = performance.now();
      const res = await fetch(`${t.url}/v1/matches`, { method: 'POST', headers: { authorization: `Bearer ${me.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ intent_id: id }) });
      await res.arrayBuffer();
      return performance.now() - start;
    };
    const questions = { unknown: 'int_unknown000000000000000', [`no counterparty (${SCANNED} scanned)`]: resting.id };
    const run = async (floor: number) => {
      t.gw.config.darkpool.matchFloorMs = floor; // the routes read the floor from this object on every answer
      const times = new Map(Object.keys(questions).map((k) => [k, [] as number[]]));
      for (const id of Object.values(questions)) await ask(id);
      for (let r = 0; r < ROUNDS; r++) {
        const order = r % 2 ? Object.entries(questions) : Object.entries(questions).reverse();
        for (const [k, id] of order) times.get(k)!.push(await ask(id));
      }
      console.log(`floor ${floor} ms`);
      const p50s: number[] = [];
      for (const [k, xs] of times) {
        p50s.push(percentile(xs, 50));
        console.log(`  ${k.padEnd(34)} p50 ${percentile(xs, 50).toFixed(1).padStart(7)} ms   p95 ${percentile(xs, 95).toFixed(1).padStart(7)} ms`);
      }
      console.log(`  ratio of p50s (scanned / unknown)   ${(p50s[1]! / p50s[0]!).toFixed(2)}x`);
      const [a, b] = [...times.values()];
      console.log(`  Kolmogorov-Smirnov statistic        ${ks(a!, b!).toFixed(2)} (critical at 0.1%: ${(1.95 * Math.sqrt(2 / ROUNDS)).toFixed(2)})`);
    };
    await run(0);
    await run(FLOOR);
  } finally {
    await t.close();
  }
}

await main();
