import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress } from 'viem';
import { ManualClock, RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, fundedKey, startTestGateway } from './support/gateway.ts';
import { startChildGateway } from './support/child-gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';

/**
 * Write-behind settles (Metering.settleBehind, money/write-behind.ts): an inference request admitted from
 * a credit lease is answered once its receipt is signed and its pending row committed in the database; the
 * settle is stored with the others gathered within 20 ms. The caller's next read waits for that, and a
 * process killed before it leaves the pending row, which the leader's sweep stores once the process is gone.
 */
let up: TestUpstream;
beforeAll(async () => {
  up = await startUpstream();
});
afterAll(async () => {
  await up?.close();
});

const providers = () =>
  JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: 'test-chat', input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000, max_output_tokens: 1000 }] }]);
const chatBody = JSON.stringify({ model: 'test-chat', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 50 });

async function chat(url: string, key: string): Promise<{ status: number; receiptId: string | null; cost: number }> {
  const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: chatBody });
  await r.arrayBuffer();
  return { status: r.status, receiptId: r.headers.get(RECEIPT_HEADERS.id), cost: Number(r.headers.get(RECEIPT_HEADERS.cost) ?? 0) };
}

describe('write-behind settles', () => {
  it("an account's next read sees every charge it was answered for", async () => {
    const t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_PROVIDERS: providers() } });
    try {
      const FUND = 10_000_000;
      const a = await fundedKey(t, FUND);
      let spent = 0;
      for (let i = 0; i < 25; i++) {
        const r = await chat(t.url, a.key);
        expect(r.status).toBe(200);
        spent += r.cost;
        // Straight after the answer: the balance, the receipt and the usage already show this request.
        const credit = (await fetch(`${t.url}/v1/credit`, { headers: { authorization: `Bearer ${a.key}` } }).then((x) => x.json())) as { balance_micro_usd: number };
        expect(credit.balance_micro_usd).toBe(FUND - spent);
        const usage = (await a.client.raw('GET', '/v1/usage/events', { query: { limit: 1 } }).then((x) => x.json())) as { events: Array<Record<string, unknown>> };
        expect(usage.events[0]).toMatchObject({ receipt_id: r.receiptId, cost_micro_usd: r.cost });
      }
      expect(spent).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });

  it('concurrent requests: receipts signed on the worker thread verify, match what is stored, and are charged once each', async () => {
    const t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_PROVIDERS: providers() } });
    try {
      const FUND = 10_000_000;
      const a = await fundedKey(t, FUND);
      await chat(t.url, a.key); // takes the credit lease; the burst is admitted from it
      const answers = await Promise.all(
        Array.from({ length: 48 }, async () => {
          const r = await fetch(`${t.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' }, body: chatBody });
          await r.arrayBuffer();
          expect(r.status).toBe(200);
          const canonical = Buffer.from(r.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
          return { id: r.headers.get(RECEIPT_HEADERS.id)!, canonical, signature: r.headers.get(RECEIPT_HEADERS.signature)! as `0x${string}` };
        }),
      );
      expect(t.gw.services.signer.signedOffThread).toBeGreaterThan(0); // the burst did not all sign inline
      const signer = t.gw.services.signer.address;
      for (const x of answers) expect(await recoverMessageAddress({ message: x.canonical, signature: x.signature })).toBe(signer);
      const credit = (await fetch(`${t.url}/v1/credit`, { headers: { authorization: `Bearer ${a.key}` } }).then((x) => x.json())) as { balance_micro_usd: number };
      const db = t.gw.database.db;
      const stored = await db.selectFrom('receipts').select(['id', 'payload', 'signature']).where('account_id', '=', a.accountId).execute();
      expect(stored).toHaveLength(49);
      const byId = new Map(stored.map((r) => [r.id, r]));
      for (const x of answers) expect(byId.get(x.id)).toMatchObject({ payload: x.canonical, signature: x.signature });
      const cost = stored.reduce((n, r) => n + (JSON.parse(r.payload) as { cost_micro_usd: number }).cost_micro_usd, 0);
      expect(credit.balance_micro_usd).toBe(FUND - cost);
    } finally {
      await t.close();
    }
  });

  it('a process killed before its settles are stored leaves them pending; the next leader stores each once', async () => {
    const FUND = 1_000_000_000;
    const first = await startTestGateway({ persistent: true, env: { ...ENFORCED_BILLING } });
    const share = { databaseUrl: first.databaseUrl, dataDir: first.dataDir };
    const s = await first.signIn();
    await first.gw.services.metering.credit(s.accountId, FUND, 'grant', 'behind-test');
    const key = (await s.client.createKey()).key;
    await first.stop();

    const { url, kill } = await startChildGateway(share, { ...ENFORCED_BILLING, SVC_PROVIDERS: providers() });
    // Callers keep 8 requests in flight; every answer they got carries a receipt id.
    const answered: string[] = [];
    let stop = false;
    const load = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const r = await chat(url, key).catch(() => null);
        if (!r) return;
        if (r.status === 200 && r.receiptId) answered.push(r.receiptId);
      }
    });
    const loadDeadline = Date.now() + 60_000;
    while (answered.length < 60) {
      if (Date.now() > loadDeadline) throw new Error(`only ${answered.length} answers within 60 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    await kill();
    stop = true;
    await Promise.all(load);

    // The next process, an hour later: its leader stores the dead process's pending settles and expires the lease.
    const after = await startTestGateway({ share, clock: new ManualClock(Date.now() + 3600_000) });
    try {
      const db = after.gw.database.db;
      expect(await after.gw.leader.runAllOnce()).toBe(true);
      const stored = new Set((await db.selectFrom('receipts').select('id').where('account_id', '=', s.accountId).execute()).map((r) => r.id));
      expect(answered.filter((id) => !stored.has(id))).toEqual([]); // every answer's charge is in the books
      expect(await db.selectFrom('money_pending_settles').selectAll().execute()).toEqual([]); // and nothing is left pending
      const pos = await db.selectFrom('credit_accounts').selectAll().where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
      const ledger = await db.selectFrom('ledger_entries').select((eb) => eb.fn.sum<number>('amount_micro_usd').as('s')).where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
      const costs = await db.selectFrom('usage_events').select((eb) => [eb.fn.sum<number>('cost_micro_usd').as('c'), eb.fn.countAll<number>().as('n')]).where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
      expect(Number(costs.n)).toBe(stored.size); // one usage event per receipt: nothing settled twice
      expect(pos.balance_micro_usd).toBe(Number(ledger.s));
      expect(pos.balance_micro_usd).toBe(FUND - Number(costs.c));
      expect({ held: pos.held_micro_usd, leased: pos.leased_micro_usd }).toEqual({ held: 0, leased: 0 });
      expect(await db.selectFrom('holds').selectAll().execute()).toEqual([]);
    } finally {
      await after.stop();
      await first.close();
    }
  }, 300_000);
});
