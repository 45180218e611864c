import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, generatePrivateKey, newId } from '@svc/shared';
import { openDatabase, type Database } from '../control-plane/src/db/database.ts';
import { migrateToLatest } from '../control-plane/src/db/migrate.ts';
import { Metering, type Hold } from '../control-plane/src/modules/money/metering.ts';
import { LEASES_CHANNEL } from '../control-plane/src/modules/money/leases.ts';
import { ReceiptSigner } from '../control-plane/src/modules/money/signer.ts';
import type { KeyPrincipal } from '../control-plane/src/http/auth-types.ts';
import { freshDatabase, type TestDatabase } from './support/database.ts';
import { tenant as makeTenant } from './support/tenant.ts';

/**
 * Credit leases (migration 0700, money/leases.ts): a process admits a chain's requests from credit the
 * database set aside for it, so most holds cost no round trip. These check that nothing can be spent twice
 * (exact admission counts under credit and caps, one process and two), that the books stay exact (balance =
 * ledger, leased = the lease rows, all of it back at close), that a dead process's lease expires, and that
 * a process gives a lease back when another needs the credit or the key changes.
 */
let tdb: TestDatabase;
let database: Database;
const clock = new ManualClock(Date.now());
const A = 1_000;

const billing = {
  enforced: true, holdTtlSeconds: 900, leaseSeconds: 60, settleBehind: false, breakerWindowSeconds: 60, breakerLimitMicroUsd: 0, notaryPriceMicroUsd: A,
  treasury: '0x1111111111111111111111111111111111111111', usdtContract: '0x2222222222222222222222222222222222222222', usdtDecimals: 6, network: 'base',
};
const processes: Metering[] = [];
const newProcess = (cfg: Partial<typeof billing> = {}) => {
  const m = new Metering(database.db, clock, new ReceiptSigner(generatePrivateKey()), { ...billing, ...cfg });
  processes.push(m);
  return m;
};

const tenant = (m: Metering, credit: number, cap: number | null = null, chainLength = 1): Promise<KeyPrincipal> => makeTenant(database.db, m, { credit, cap, chainLength });

const hold = (m: Metering, p: KeyPrincipal, amount = A) =>
  m.hold({ principal: p, requestId: newId('req_', 20), runId: null, maxCostMicroUsd: amount, route: 'POST /test', resource: 'test' });

/** balance = sum(ledger); leased = the lease rows, on the account and on each key of the chain. */
async function books(p: KeyPrincipal) {
  const r = await sql<{ balance: number; ledger: number; held: number; leased: number; rows: number; lease_rows: number }>`
    select c.balance_micro_usd::int as balance, c.held_micro_usd::int as held, c.leased_micro_usd::int as leased,
      (select coalesce(sum(amount_micro_usd), 0)::int from ledger_entries l where l.account_id = c.account_id) as ledger,
      (select coalesce(sum(amount_micro_usd), 0)::int from holds h where h.account_id = c.account_id and h.lease) as rows,
      (select count(*)::int from holds h where h.account_id = c.account_id and h.lease) as lease_rows
    from credit_accounts c where c.account_id = ${p.accountId}`.execute(database.db);
  const keys = await database.db.selectFrom('api_keys').select(['id', 'leased_micro_usd', 'spent_micro_usd', 'held_micro_usd']).where('id', 'in', p.chain).execute();
  return { ...r.rows[0]!, keys };
}

beforeAll(async () => {
  tdb = await freshDatabase();
  database = await openDatabase({ databaseUrl: tdb.url, memory: tdb.url === undefined });
  await migrateToLatest(database.db);
});

afterAll(async () => {
  for (const m of processes) await m.close();
  await database?.close();
  await tdb?.drop();
});

describe('credit leases', () => {
  it('write-behind: a settle out of a lease answers before it is stored, the position waits for it, no pending row is left', async () => {
    const m = new Metering(database.db, clock, new ReceiptSigner(generatePrivateKey()), billing, { processId: newId('svc_p_', 16), asyncCommit: database.asyncCommit });
    processes.push(m);
    const p = await tenant(m, 1_000_000);
    let spent = 0;
    for (let i = 0; i < 30; i++) {
      const h = await hold(m, p);
      expect(h.lease).toBe(true);
      const s = await m.settle(h, { costMicroUsd: 100 + i, kind: 'test', units: { n: i } }, { behind: true });
      expect(s.balanceMicroUsd).toBeNull(); // answered before its commit
      spent += 100 + i;
      // The account's own read waits for its settles: never a balance older than the answers it got.
      expect((await m.position(p.accountId)).balance_micro_usd).toBe(1_000_000 - spent);
    }
    await m.settledAll();
    const b = await books(p);
    expect(b).toMatchObject({ balance: 1_000_000 - spent, ledger: 1_000_000 - spent, held: 0 });
    expect(b.leased).toBe(b.rows);
    expect(await database.db.selectFrom('receipts').select('id').where('account_id', '=', p.accountId).execute()).toHaveLength(30);
    await m.close();
    expect((await books(p)).leased).toBe(0);
    expect(await database.db.selectFrom('money_pending_settles').select('receipt_id').where('account_id', '=', p.accountId).execute()).toEqual([]); // every pending row stored and removed
  });

  it('write-behind: pending settles are stored once, by a read of the account, by the sweep once their process is gone, or once they are too old', async () => {
    // Process A answers its settles and keeps them pending (its gather waits ten minutes unless read).
    const a = new Metering(database.db, clock, new ReceiptSigner(generatePrivateKey()), { ...billing, settleGatherMs: 600_000 }, { processId: newId('svc_p_', 16), asyncCommit: database.asyncCommit });
    const b = new Metering(database.db, clock, new ReceiptSigner(generatePrivateKey()), billing, { processId: newId('svc_p_', 16), asyncCommit: database.asyncCommit });
    processes.push(a, b);
    const p = await tenant(a, 1_000_000);
    const owners = async () => (await database.db.selectFrom('money_pending_settles').select('owner').where('account_id', '=', p.accountId).execute()).length;
    const stored = async () => (await database.db.selectFrom('receipts').select('id').where('account_id', '=', p.accountId).execute()).length;
    const answer = async (n: number) => {
      for (let i = 0; i < n; i++) await a.settle(await hold(a, p), { costMicroUsd: 100, kind: 'test', units: {} }, { behind: true });
    };
    const aliveAll = async (ids: readonly string[]) => new Set(ids);
    const aliveNone = async () => new Set<string>();

    await answer(3);
    expect(await owners()).toBe(3);
    expect(await b.sweepPending(aliveAll)).toBe(0); // A is there and its rows are young: left to A
    await b.settled(p.accountId); // a read on B stores them
    expect({ pending: await owners(), stored: await stored() }).toEqual({ pending: 0, stored: 3 });

    await answer(4);
    expect(await b.sweepPending(aliveNone)).toBe(4); // A is gone: the sweep stores its rows
    expect(await b.sweepPending(aliveNone)).toBe(0); // and only once

    await answer(2);
    clock.advance(61_000);
    expect(await b.sweepPending(aliveAll)).toBe(2); // A lives but its rows are older than the bound

    await a.settledAll(); // A's own flush finds them taken: done, nothing stored twice
    expect({ pending: await owners(), stored: await stored() }).toEqual({ pending: 0, stored: 9 });
    const ledger = await database.db.selectFrom('usage_events').select('id').where('account_id', '=', p.accountId).execute();
    expect(ledger).toHaveLength(9);
    await a.close();
    await b.close();
    const books1 = await books(p);
    expect(books1).toMatchObject({ balance: 1_000_000 - 900, ledger: 1_000_000 - 900, held: 0, leased: 0 });
  });

  it('write-behind: a settle whose receipt is already stored (a commit whose answer was lost) counts as done, charged once', async () => {
    const m = new Metering(database.db, clock, new ReceiptSigner(generatePrivateKey()), billing, { processId: newId('svc_p_', 16), asyncCommit: database.asyncCommit });
    processes.push(m);
    const p = await tenant(m, 1_000_000);
    const h = await hold(m, p);
    const usage = { costMicroUsd: 250, kind: 'test', units: {} };
    await m.settle(h, usage, { behind: true });
    await m.settledAll();
    // The same settle once more, as a retry after a lost answer would send it: its receipt is there already.
    expect((await m.settle(h, usage, { behind: true })).balanceMicroUsd).toBeNull();
    await m.settledAll(); // done, not retried for ever
    const b = await books(p);
    expect(b).toMatchObject({ balance: 1_000_000 - 250, ledger: 1_000_000 - 250 });
    expect(await database.db.selectFrom('receipts').select('id').where('account_id', '=', p.accountId).execute()).toHaveLength(1);
  });

  it('admits from a lease without a hold row per request, settles out of it, and gives everything back at close', async () => {
    const m = newProcess();
    const p = await tenant(m, 1_000_000, null, 2);
    const first = await hold(m, p);
    expect(first.lease).toBe(true);
    // room = 999,000 spendable after the request; a quarter of it caps the lease, and 64 requests are wanted.
    let b = await books(p);
    expect(b).toMatchObject({ leased: 64 * A, rows: 64 * A, lease_rows: 1, held: 0 });
    expect(b.keys.map((k) => Number(k.leased_micro_usd))).toEqual([64 * A, 64 * A]);

    const more = await Promise.all(Array.from({ length: 20 }, () => hold(m, p)));
    expect(more.every((h) => h.lease && h.id === first.id)).toBe(true);
    expect((await books(p)).lease_rows).toBe(1); // no new rows: admitted in memory
    const all = [first, ...more];
    await Promise.all(all.map((h, i) => (i % 5 === 0 ? m.release(h) : m.settle(h, { costMicroUsd: 300 + i, kind: 'test', units: { n: 1 } }))));
    const spent = all.reduce((s, _, i) => s + (i % 5 === 0 ? 0 : 300 + i), 0);

    b = await books(p);
    expect(b).toMatchObject({ balance: 1_000_000 - spent, ledger: 1_000_000 - spent, held: 0, leased: 64 * A - spent, rows: 64 * A - spent });
    for (const k of b.keys) expect(k).toMatchObject({ spent_micro_usd: spent, held_micro_usd: 0, leased_micro_usd: 64 * A - spent });

    await m.leases.returnAccount(p.accountId);
    b = await books(p);
    expect(b).toMatchObject({ balance: 1_000_000 - spent, leased: 0, lease_rows: 0 });
    for (const k of b.keys) expect(Number(k.leased_micro_usd)).toBe(0);
  });

  it('settles of one lease committed together each answer the balance after their own charge', async () => {
    const m = newProcess();
    const p = await tenant(m, 1_000_000);
    const first = await hold(m, p); // takes the lease the others are admitted from
    const holds = [first, ...(await Promise.all(Array.from({ length: 11 }, () => hold(m, p))))];
    expect(new Set(holds.map((h) => h.id)).size).toBe(1); // one lease: every settle carries the same hold id
    const costs = holds.map((_, i) => 100 + 7 * i);
    const settled = await Promise.all(holds.map((h, i) => m.settle(h, { costMicroUsd: costs[i]!, kind: 'test', units: { n: i } })));
    // Batches may commit in either order (two connections), so: in the order of their balances, each is the
    // one before it less its own cost.
    const chain = settled.map((s, i) => ({ balance: s.balanceMicroUsd!, cost: costs[i]! })).sort((x, y) => y.balance - x.balance);
    let balance = 1_000_000;
    for (const c of chain) expect(c.balance).toBe((balance -= c.cost));
    const ledger = await database.db.selectFrom('ledger_entries').select(['ref', 'balance_after_micro_usd']).where('account_id', '=', p.accountId).where('kind', '=', 'usage').execute();
    const after = new Map(ledger.map((l) => [l.ref, Number(l.balance_after_micro_usd)]));
    for (const s of settled) expect(after.get(s.usageEventId)).toBe(s.balanceMicroUsd);
  });

  it('never admits more than the credit: 1,000 parallel holds on credit for 200 get exactly 200, in one process', async () => {
    const m = newProcess();
    const p = await tenant(m, 200 * A);
    // One hold first, so a lease is in play for the burst (alone, its ask is decided while all the room is there;
    // inside a burst, batches that ran before it could leave too little room to lease).
    const first = await hold(m, p);
    expect(first.lease).toBe(true);
    const out = await Promise.allSettled(Array.from({ length: 999 }, () => hold(m, p)));
    const ok = [first, ...out.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<Hold>).value)];
    expect(ok).toHaveLength(200);
    expect(ok.filter((h) => h.lease).length).toBeGreaterThan(1); // the burst was admitted from the lease too
    for (const r of out) if (r.status === 'rejected') expect(r.reason).toMatchObject({ type: 'insufficient_credit' });
    await Promise.all(ok.map((h) => m.settle(h, { costMicroUsd: A, kind: 'test', units: { n: 1 } })));
    expect(await books(p)).toMatchObject({ balance: 0, ledger: 0, held: 0, leased: 0 });
  });

  it('never admits more than a key cap along the chain, and never more than the credit across two processes', async () => {
    const m1 = newProcess();
    const m2 = newProcess();
    const capped = await tenant(m1, 10_000_000, 150 * A, 2);
    const out = await Promise.allSettled(Array.from({ length: 600 }, (_, i) => hold(i % 2 ? m1 : m2, capped)));
    const ok = out.filter((r) => r.status === 'fulfilled');
    expect(ok.length).toBeLessThanOrEqual(150);
    for (const r of out) if (r.status === 'rejected') expect(r.reason).toMatchObject({ type: 'spend_cap_reached' });

    const shared = await tenant(m1, 300 * A);
    const both = await Promise.allSettled(Array.from({ length: 900 }, (_, i) => hold(i % 2 ? m1 : m2, shared)));
    const admitted = both.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<Hold>).value);
    expect(admitted.length).toBeLessThanOrEqual(300);
    // Once both give their leases back, whatever the other one had set aside can be held: 300 in all.
    await m1.leases.returnAccount(shared.accountId);
    await m2.leases.returnAccount(shared.accountId);
    const rest = await Promise.allSettled(Array.from({ length: 300 }, () => hold(m1, shared)));
    expect(admitted.length + rest.filter((r) => r.status === 'fulfilled').length).toBe(300);
  });

  it('a process asked for the credit by another (NOTIFY svc_leases) gives its lease back', async () => {
    const m1 = newProcess();
    const m2 = newProcess();
    const unlisten = await database.listen(LEASES_CHANNEL, (account) => void m1.leases.returnAccount(account));
    try {
      const p = await tenant(m1, 41 * A);
      const h = await hold(m1, p); // m1 leases A and a quarter of the 40 A left
      expect(h.lease).toBe(true);
      expect((await books(p)).leased).toBe(11 * A);
      // m2 wants everything else plus one more than what is free outside the lease: refused, and m1 is asked.
      const big = await hold(m2, p, 30 * A);
      await expect(hold(m2, p, 9 * A)).rejects.toMatchObject({ type: 'insufficient_credit' });
      for (let i = 0; i < 200 && (await books(p)).leased > A; i++) await new Promise((r) => setImmediate(r));
      // m1 kept only what its request in flight reserved; the other 10 A can be held again.
      expect((await books(p)).leased).toBe(A);
      const again = await hold(m2, p, 9 * A);
      expect(again.lease).toBe(false);
      await m1.settle(h, { costMicroUsd: A, kind: 'test', units: { n: 1 } });
      await m2.release(big);
      await m2.release(again);
      expect(await books(p)).toMatchObject({ balance: 40 * A, held: 0, leased: 0, lease_rows: 0 });
    } finally {
      await unlisten();
    }
  });

  it("a key's change gives its leases back, so the next hold is decided under the key's row lock", async () => {
    const m = newProcess();
    const p = await tenant(m, 1_000_000);
    const h = await hold(m, p);
    expect(h.lease).toBe(true);
    await database.db.updateTable('api_keys').set({ frozen_at: clock.now(), frozen_reason: 'test' }).where('id', '=', p.keyId).execute();
    m.leases.dropFor(p.keyId); // what KeysService's invalidation (local, or NOTIFY svc_keys) calls
    await expect(hold(m, p)).rejects.toMatchObject({ type: 'circuit_breaker_tripped' });
    await m.settle(h, { costMicroUsd: A, kind: 'test', units: { n: 1 } });
    expect(await books(p)).toMatchObject({ balance: 1_000_000 - A, leased: 0, lease_rows: 0 });
  });

  it("a dead process's lease expires like a hold; its requests in flight are still charged", async () => {
    const dead = newProcess();
    const p = await tenant(dead, 1_000_000);
    const h = await hold(dead, p);
    expect(h.lease).toBe(true);
    // The process is gone: nothing renews the lease. After its lifetime the leader releases it.
    clock.advance(61_000);
    const leader = newProcess();
    expect(await leader.expireHolds()).toBeGreaterThanOrEqual(1);
    expect(await books(p)).toMatchObject({ leased: 0, lease_rows: 0, balance: 1_000_000 });
    // A late settle of a request admitted from it is charged, and releases nothing twice.
    await dead.settle(h, { costMicroUsd: A, kind: 'test', units: { n: 1 } });
    expect(await books(p)).toMatchObject({ balance: 1_000_000 - A, ledger: 1_000_000 - A, leased: 0, held: 0 });
    // Its own clock says the lease is over too: the next hold asks the database again.
    const next = await hold(dead, p);
    expect(next.id).not.toBe(h.id);
    await dead.release(next);
  });

  it('renews a lease in use before it expires, so the leader does not release it', async () => {
    const m = newProcess();
    const p = await tenant(m, 1_000_000);
    const h = await hold(m, p);
    const expiry = async () => (await database.db.selectFrom('holds').select('expires_at').where('id', '=', h.id).executeTakeFirstOrThrow()).expires_at.getTime();
    const first = await expiry();
    clock.advance(31_000); // past half its life, with a request in flight
    await m.leases.tick();
    expect(await expiry()).toBe(first + 31_000);
    clock.advance(31_000); // past the first expiry
    await newProcess().expireHolds();
    expect((await books(p)).lease_rows).toBe(1);
    expect((await hold(m, p)).id).toBe(h.id); // still usable here
    await m.settle(h, { costMicroUsd: A, kind: 'test', units: { n: 1 } });
  });

  it('small balances and tight caps never lease: every hold is decided in the database', async () => {
    const m = newProcess();
    const poor = await tenant(m, 10 * A);
    const hs = await Promise.all(Array.from({ length: 10 }, () => hold(m, poor)));
    expect(hs.some((h) => h.lease)).toBe(false);
    expect((await books(poor)).held).toBe(10 * A);
    await Promise.all(hs.map((h) => m.release(h)));
    const off = newProcess({ leaseSeconds: 0 });
    const rich = await tenant(off, 1_000_000);
    expect((await hold(off, rich)).lease).toBe(false);
  });
});
