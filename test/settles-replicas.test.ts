import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startChildGateway } from './support/child-gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { TEST_DB_KIND } from './support/database.ts';

/**
 * Settles answered by one replica, seen from another (money/write-behind.ts, money/pending-settles.ts). Two
 * gateway processes on one Postgres: this test's own (`survivor`, the leader) and a child process it kills
 * with SIGKILL. A chat call admitted from a credit lease is answered once its pending settle is committed in
 * Postgres; the other replica reads it at once (read-your-writes), a replica killed before storing it leaves
 * it to the leader's sweep, and a replica restarted on its data dir stores nothing twice.
 */
const FUND = 1_000_000_000;
let up: TestUpstream;
let survivor: TestGateway & { databaseUrl: string | undefined; dataDir: string };
let account: { accountId: string; token: string; key: string };
let childDir: string;

const providers = () =>
  JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: 'test-chat', input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000, max_output_tokens: 1000 }] }]);
const chatBody = JSON.stringify({ model: 'test-chat', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 50 });
const env = () => ({ ...ENFORCED_BILLING, SVC_PROVIDERS: providers() });
/**
 * A replica with a data dir of its own is given the keys every replica shares. Its settles wait a minute to be
 * stored (unless read), so that each one it answered is still pending when it is read elsewhere or killed.
 */
const replicaEnv = () => ({ ...env(), SVC_SETTLE_GATHER_MS: '60000', SVC_SIGNER_KEY: survivor.gw.signerKey, SVC_SEAL_KEY: `0x${Buffer.from(survivor.gw.sealKey).toString('hex')}` });

async function chat(url: string): Promise<{ status: number; receiptId: string | null; cost: number }> {
  const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' }, body: chatBody });
  await r.arrayBuffer();
  return { status: r.status, receiptId: r.headers.get(RECEIPT_HEADERS.id), cost: Number(r.headers.get(RECEIPT_HEADERS.cost) ?? 0) };
}

const get = (url: string, path: string, token: string) => fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });

/** Chat calls from `callers` loops on each URL until `enough(answered)`; the 2xx answers' receipt ids per URL. */
async function load(urls: string[], callers: number, enough: (answered: Map<string, string[]>) => boolean): Promise<{ answered: Map<string, string[]>; stop: () => Promise<void> }> {
  const answered = new Map(urls.map((u) => [u, [] as string[]]));
  let stopped = false;
  const loops = urls.flatMap((u) =>
    Array.from({ length: callers }, async () => {
      while (!stopped) {
        const r = await chat(u).catch(() => null);
        if (!r) return; // the process is gone
        if (r.status >= 200 && r.status < 300 && r.receiptId) answered.get(u)!.push(r.receiptId);
      }
    }),
  );
  const deadline = Date.now() + 60_000;
  while (!enough(answered)) {
    if (Date.now() > deadline) throw new Error(`too few answers within 60 s: ${[...answered.values()].map((a) => a.length).join(', ')}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return {
    answered,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/**
 * Waits (bounded) until Postgres no longer counts the killed process's connections (then it is gone to every
 * replica); how many settles it left pending.
 */
async function ownersGone(): Promise<number> {
  const db = survivor.gw.database.db;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = (await sql<{ owner: string; n: string }>`select owner, count(*) as n from money_pending_settles where owner <> ${survivor.gw.database.processId} group by owner`.execute(db)).rows;
    const alive = await survivor.gw.database.processesAlive(rows.map((r) => r.owner));
    if (alive.size === 0) return rows.reduce((n, r) => n + Number(r.n), 0);
    if (Date.now() > deadline) throw new Error('the killed process still has connections after 30 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The account's books: every answered receipt stored once, charged once, nothing pending. */
async function expectSettledOnce(answered: string[]) {
  const db = survivor.gw.database.db;
  const receipts = await db.selectFrom('receipts').select(['id', 'payload']).where('account_id', '=', account.accountId).execute();
  const ids = new Set(receipts.map((r) => r.id));
  expect(answered.filter((id) => !ids.has(id))).toEqual([]); // every 2xx answer is in the books
  expect(ids.size).toBe(receipts.length);
  const events = await db.selectFrom('usage_events').select(['receipt_id', 'cost_micro_usd']).where('account_id', '=', account.accountId).execute();
  expect(events).toHaveLength(receipts.length); // one usage event per receipt: nothing settled twice
  expect(new Set(events.map((e) => e.receipt_id)).size).toBe(events.length);
  const cost = events.reduce((n, e) => n + Number(e.cost_micro_usd), 0);
  expect(cost).toBe(receipts.reduce((n, r) => n + (JSON.parse(r.payload) as { cost_micro_usd: number }).cost_micro_usd, 0));
  const pos = await db.selectFrom('credit_accounts').selectAll().where('account_id', '=', account.accountId).executeTakeFirstOrThrow();
  const ledger = await db.selectFrom('ledger_entries').select((eb) => eb.fn.sum<number>('amount_micro_usd').as('s')).where('account_id', '=', account.accountId).executeTakeFirstOrThrow();
  expect(pos.balance_micro_usd).toBe(FUND - cost); // the credit is charged
  expect(pos.balance_micro_usd).toBe(Number(ledger.s));
  expect(await db.selectFrom('money_pending_settles').selectAll().execute()).toEqual([]);
}

describe.runIf(TEST_DB_KIND === 'postgres')('settles across replicas on one Postgres', () => {
  beforeAll(async () => {
    up = await startUpstream();
    survivor = await startTestGateway({ env: env(), clock: new ManualClock(Date.now()) });
    const s = await survivor.signIn();
    await survivor.gw.services.metering.credit(s.accountId, FUND, 'grant', 'replicas-test');
    account = { accountId: s.accountId, token: s.token, key: (await s.client.createKey()).key };
    childDir = mkdtempSync(join(tmpdir(), 'svc-replica-'));
  }, 120_000);
  afterAll(async () => {
    await survivor?.close();
    await up?.close();
    if (childDir) rmSync(childDir, { recursive: true, force: true });
  });

  let child: { url: string; kill(): Promise<void> };

  it('a receipt and a usage event answered by one replica are read on the other at once, every time', async () => {
    child = await startChildGateway({ databaseUrl: survivor.databaseUrl, dataDir: childDir }, replicaEnv());
    let found = 0;
    for (let i = 0; i < 200; i++) {
      const [from, on] = i % 2 === 0 ? [child.url, survivor.url] : [survivor.url, child.url];
      const r = await chat(from);
      expect(r.status).toBe(200);
      // Alternately the receipt first and the usage event first: each read stands on its own.
      const receipt = async () => (await get(on, `/v1/receipts/${r.receiptId}`, account.token)).status;
      const event = async () => {
        const page = (await (await get(on, '/v1/usage/events?limit=1', account.token)).json()) as { events: Array<{ receipt_id: string }> };
        return page.events[0]?.receipt_id;
      };
      let status: number;
      let latest: string | undefined;
      if (i % 4 < 2) {
        status = await receipt();
        latest = await event();
      } else {
        latest = await event();
        status = await receipt();
      }
      if (status === 200 && latest === r.receiptId) found++;
      else expect({ i, status, latest }).toEqual({ i, status: 200, latest: r.receiptId });
    }
    expect(found).toBe(200);
  }, 180_000);

  it('a replica killed under load and restarted on its intact data dir: every answered call settled once', async () => {
    const run = await load([child.url, survivor.url], 4, (a) => a.get(child.url)!.length >= 40);
    await child.kill();
    await run.stop();
    const answered = [...run.answered.values()].flat();
    const left = await ownersGone();
    expect(left).toBeGreaterThan(0); // answered, not stored yet
    child = await startChildGateway({ databaseUrl: survivor.databaseUrl, dataDir: childDir }, replicaEnv());
    // The restarted replica reads the account first (it stores what is pending of it), then the leader sweeps.
    expect((await get(child.url, '/v1/credit', account.key)).status).toBe(200);
    expect(await survivor.gw.leader.runAllOnce()).toBe(true);
    await survivor.gw.services.metering.settledAll();
    await expectSettledOnce(answered);
  }, 240_000);

  it('a replica killed under load whose data dir is deleted: the survivor settles every answered call once within one sweep', async () => {
    const run = await load([child.url, survivor.url], 4, (a) => a.get(child.url)!.length >= 40);
    await child.kill();
    rmSync(childDir, { recursive: true, force: true }); // the replica never comes back
    await run.stop();
    const answered = [...run.answered.values()].flat();
    const db = survivor.gw.database.db;
    const left = await ownersGone();
    expect(left).toBeGreaterThan(0); // answered, not stored yet
    expect(await survivor.gw.leader.runAllOnce()).toBe(true); // one sweep
    await survivor.gw.services.metering.settledAll();
    console.log(`${answered.length} answered, ${left} left pending by the killed replica`);
    await expectSettledOnce(answered);
    for (const id of run.answered.get(child.url)!.slice(-20)) expect((await get(survivor.url, `/v1/receipts/${id}`, account.token)).status).toBe(200);
    // Past the lease TTL the dead replica's lease is swept back: nothing held or leased is left.
    survivor.clock.advance(3600_000);
    expect(await survivor.gw.leader.runAllOnce()).toBe(true);
    const pos = await db.selectFrom('credit_accounts').selectAll().where('account_id', '=', account.accountId).executeTakeFirstOrThrow();
    expect({ held: pos.held_micro_usd, leased: pos.leased_micro_usd }).toEqual({ held: 0, leased: 0 });
    await expectSettledOnce(answered);
  }, 240_000);
});
