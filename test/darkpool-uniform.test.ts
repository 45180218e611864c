import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MatchTrace } from '../control-plane/src/modules/darkpool/matches.ts';
import { startTestGateway } from './support/gateway.ts';

/**
 * The negative answer of POST /v1/matches is uniform: for an unknown intent id, another account's intent, an
 * intent of yours that is withdrawn, and a resting intent of yours for which no counterparty crosses (while two
 * hundred intents of the other side rest, each opened and compared), the status, headers and body bytes are
 * the same, every question runs the same lookups (its own intent, then one side of a book: the dummy one when
 * there is nothing to look for), and the route holds every answer to the floor. The dark pool's answer trace
 * shows the path each took. What the floor hides in time is measured by bench/darkpool.ts, not here.
 */

const FLOOR_MS = 150;
const ROUNDS = 2;

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
  const traces: MatchTrace[] = [];
  t.gw.darkpool.traceAnswers = (x) => traces.push(x);
  try {
    const res = await fetch(`${t.url}/v1/matches`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ intent_id: intentId }) });
    const body = Buffer.from(await res.arrayBuffer());
    const headers = Object.fromEntries([...res.headers].filter(([k]) => !['date', 'x-request-id'].includes(k)));
    expect(traces).toHaveLength(1);
    return { status: res.status, headers, body, trace: traces[0]! };
  } finally {
    t.gw.darkpool.traceAnswers = undefined;
  }
}

describe('the negative match answer', () => {
  it('is byte-identical whatever the reason, runs the same lookups, and is held to the floor', async () => {
    const names = [...cases.keys()];
    const answers = new Map<string, Array<Awaited<ReturnType<typeof askRaw>>>>(names.map((n) => [n, []]));
    for (let round = 0; round < ROUNDS; round++) for (const n of names) answers.get(n)!.push(await askRaw(cases.get(n)!));
    const ref = answers.get('unknown id')![0]!;
    expect(ref.status).toBe(200);
    expect(ref.body.toString()).toBe('{"object":"match_result","matched":false,"match":null}');
    for (const n of names) {
      for (const a of answers.get(n)!) {
        expect(a.status, n).toBe(ref.status);
        expect(a.headers, n).toEqual(ref.headers);
        expect(a.body.equals(ref.body), n).toBe(true);
        // The same lookups in the same order, one pass, the negative answer; the route held it to the floor.
        expect(a.trace, n).toMatchObject({ lookups: ['own_intent', 'resting_book'], answer: 'no_match', floor_ms: FLOOR_MS });
        expect(a.trace.held_ms, n).toBe(Math.max(0, FLOOR_MS - a.trace.elapsed_ms)); // waited out the rest of the floor
      }
    }
    // What differs is hidden, not skipped: with nothing to look for the dummy book is searched (empty), and the
    // resting intent's question opens the two hundred intents of the other side.
    const paths = names.map((n) => [n, answers.get(n)![0]!.trace.book, answers.get(n)![0]!.trace.scanned]);
    expect(paths).toEqual([
      ['unknown id', 'none', 0],
      ["another account's intent", 'none', 0],
      ['your withdrawn intent', 'none', 0],
      ['no counterparty crosses (200 scanned)', 'counter_side', 200],
    ]);
  }, 120_000);
});
