import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { generatePrivateKey, newId, systemClock } from '@svc/shared';
import { openDatabase, type Database } from '../control-plane/src/db/database.ts';
import { migrateToLatest } from '../control-plane/src/db/migrate.ts';
import { Metering, type Hold } from '../control-plane/src/modules/money/metering.ts';
import { ReceiptSigner } from '../control-plane/src/modules/money/signer.ts';
import type { KeyPrincipal } from '../control-plane/src/http/auth-types.ts';
import { freshDatabase, type TestDatabase } from './support/database.ts';
import { tenant as makeTenant } from './support/tenant.ts';

/**
 * The money path's batches: many holds and settles in flight at once go to the database together
 * (svc_hold_many, svc_settle_many). These check the bookkeeping of a batch item by item: every ledger
 * entry's balance_after follows from the one before it, keys of a delegated chain all pay, nothing stays
 * held, and an expired hold is still charged without releasing twice.
 */
let tdb: TestDatabase;
let database: Database;
let metering: Metering;

const billing = {
  enforced: true, holdTtlSeconds: 900, leaseSeconds: 0, settleBehind: false, breakerWindowSeconds: 60, breakerLimitMicroUsd: 0, notaryPriceMicroUsd: 1000,
  treasury: '0x1111111111111111111111111111111111111111', usdtContract: '0x2222222222222222222222222222222222222222', usdtDecimals: 6, network: 'base',
};

const tenant = (credit: number, chainLength = 1, cap: number | null = null): Promise<KeyPrincipal> => makeTenant(database.db, metering, { credit, chainLength, cap });

const hold = (p: KeyPrincipal, amount: number) =>
  metering.hold({ principal: p, requestId: newId('req_', 20), runId: null, maxCostMicroUsd: amount, route: 'POST /test', resource: 'test' });

beforeAll(async () => {
  tdb = await freshDatabase();
  database = await openDatabase({ databaseUrl: tdb.url, memory: tdb.url === undefined });
  await migrateToLatest(database.db);
  metering = new Metering(database.db, systemClock, new ReceiptSigner(generatePrivateKey()), billing);
});

afterAll(async () => {
  await database?.close();
  await tdb?.drop();
});

describe('batched settlement', () => {
  it('keeps every ledger entry, key total and hold exact across accounts settled together', async () => {
    const tenants = await Promise.all([tenant(1_000_000), tenant(1_000_000, 3), tenant(1_000_000, 2, 500_000)]);
    // 60 concurrent requests over three tenants, costs 1..60, some free; all hold 10,000.
    const holds: Array<{ h: Hold; p: KeyPrincipal; cost: number }> = [];
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const p = tenants[i % 3]!;
        holds.push({ h: await hold(p, 10_000), p, cost: i % 7 === 0 ? 0 : (i + 1) * 100 });
      }),
    );
    const settled = await Promise.all(holds.map(({ h, cost }) => metering.settle(h, { costMicroUsd: cost, kind: 'test', units: { n: 1 } })));
    expect(settled).toHaveLength(60);

    const { db } = database;
    for (const p of tenants) {
      const mine = holds.filter((x) => x.p === p);
      const spent = mine.reduce((s, x) => s + x.cost, 0);
      const pos = await metering.position(p.accountId);
      expect(pos).toMatchObject({ balance_micro_usd: 1_000_000 - spent, held_micro_usd: 0 });
      // Ledger: one entry per charged request; each balance_after is the previous one minus its amount.
      const entries = await db.selectFrom('ledger_entries').selectAll().where('account_id', '=', p.accountId).orderBy('id').execute();
      expect(entries).toHaveLength(1 + mine.filter((x) => x.cost > 0).length);
      for (let i = 1; i < entries.length; i++) {
        expect(Number(entries[i]!.balance_after_micro_usd)).toBe(Number(entries[i - 1]!.balance_after_micro_usd) + Number(entries[i]!.amount_micro_usd));
      }
      expect(Number(entries.at(-1)!.balance_after_micro_usd)).toBe(1_000_000 - spent);
      // Every key of the chain paid the whole spend and holds nothing.
      const keys = await db.selectFrom('api_keys').select(['id', 'spent_micro_usd', 'held_micro_usd', 'window_spent_micro_usd']).where('id', 'in', p.chain).execute();
      for (const k of keys) expect(k).toMatchObject({ spent_micro_usd: spent, held_micro_usd: 0 });
      // The settle reported each request's balance right after it: the lowest equals the final balance.
      const balances = settled.filter((_, i) => holds[i]!.p === p).map((s) => s.balanceMicroUsd!);
      expect(Math.min(...balances)).toBe(1_000_000 - spent);
      // One usage event and one receipt per request, linked to each other.
      const events = await db.selectFrom('usage_events').select(['id', 'receipt_id', 'cost_micro_usd', 'key_id']).where('account_id', '=', p.accountId).execute();
      expect(events).toHaveLength(mine.length);
      expect(new Set(events.map((e) => e.key_id))).toEqual(new Set([p.chain[0]]));
      const receipts = await db.selectFrom('receipts').select(['id', 'usage_event_id']).where('account_id', '=', p.accountId).execute();
      expect(receipts.map((r) => `${r.id}/${r.usage_event_id}`).sort()).toEqual(events.map((e) => `${e.receipt_id}/${e.id}`).sort());
    }
    const open = await sql<{ n: number }>`select count(*)::int as n from holds`.execute(db);
    expect(open.rows[0]!.n).toBe(0);
  });

  it('charges a settle whose hold already expired without releasing it twice', async () => {
    const p = await tenant(100_000);
    const h = await hold(p, 50_000);
    const other = await hold(p, 20_000);
    await sql`update holds set expires_at = now() - interval '1 second' where id = ${h.id}`.execute(database.db);
    expect(await metering.expireHolds()).toBe(1);
    await Promise.all([metering.settle(h, { costMicroUsd: 30_000, kind: 'test', units: {} }), metering.settle(other, { costMicroUsd: 5_000, kind: 'test', units: {} })]);
    expect(await metering.position(p.accountId)).toMatchObject({ balance_micro_usd: 65_000, held_micro_usd: 0 });
    const [k] = await database.db.selectFrom('api_keys').select(['spent_micro_usd', 'held_micro_usd']).where('id', '=', p.keyId).execute();
    expect(k).toMatchObject({ spent_micro_usd: 35_000, held_micro_usd: 0 });
  });

  it('decides each hold of a batch after the holds before it (credit, caps along the chain)', async () => {
    const poor = await tenant(35_000);
    const capped = await tenant(1_000_000, 2, 12_000);
    const outcomes = async (p: KeyPrincipal) => {
      const r = await Promise.allSettled(Array.from({ length: 10 }, () => hold(p, 5_000)));
      const held = r.flatMap((x) => (x.status === 'fulfilled' ? [x.value] : []));
      const errors = r.flatMap((x) => (x.status === 'rejected' ? [(x.reason as { type?: string }).type] : []));
      return { held, errors };
    };
    const [a, b] = await Promise.all([outcomes(poor), outcomes(capped)]);
    expect(a.held).toHaveLength(7);
    expect(a.errors).toEqual(Array(3).fill('insufficient_credit'));
    expect(b.held).toHaveLength(2);
    expect(b.errors).toEqual(Array(8).fill('spend_cap_reached'));
    expect(await metering.position(poor.accountId)).toMatchObject({ held_micro_usd: 35_000 });
    const keys = await database.db.selectFrom('api_keys').select(['held_micro_usd']).where('id', 'in', capped.chain).execute();
    expect(keys.map((k) => Number(k.held_micro_usd))).toEqual([10_000, 10_000]);
    await Promise.all([...a.held, ...b.held].map((h) => metering.release(h)));
    expect(await metering.position(poor.accountId)).toMatchObject({ balance_micro_usd: 35_000, held_micro_usd: 0 });
    expect(await metering.position(capped.accountId)).toMatchObject({ held_micro_usd: 0 });
  });

  it('refuses a frozen or revoked key under its row lock, whatever an auth cache believes', async () => {
    const p = await tenant(100_000);
    const q = await tenant(100_000);
    await database.db.updateTable('api_keys').set({ frozen_at: new Date(), frozen_reason: 'test' }).where('id', '=', p.keyId).execute();
    await database.db.updateTable('api_keys').set({ revoked_at: new Date() }).where('id', '=', q.keyId).execute();
    const [a, b] = await Promise.allSettled([hold(p, 1_000), hold(q, 1_000)]);
    expect(a.status === 'rejected' && (a.reason as { type: string }).type).toBe('circuit_breaker_tripped');
    expect(b.status === 'rejected' && (b.reason as { type: string }).type).toBe('invalid_credential');
    expect(await metering.position(p.accountId)).toMatchObject({ held_micro_usd: 0 });
  });

  it('holds and settles for a principal without keys (the keyless terminal)', async () => {
    const p = await tenant(10_000);
    const keyless: KeyPrincipal = { ...p, keyId: 'terminal', chain: [] };
    const [a, b] = await Promise.all([hold(keyless, 4_000), hold(keyless, 4_000)]);
    await expect(hold(keyless, 4_000)).rejects.toMatchObject({ type: 'insufficient_credit' });
    await Promise.all([metering.settle(a, { costMicroUsd: 1_500, kind: 'test', units: {} }), metering.settle(b, { costMicroUsd: 500, kind: 'test', units: {} })]);
    expect(await metering.position(p.accountId)).toMatchObject({ balance_micro_usd: 8_000, held_micro_usd: 0 });
  });

  it('creates the credit row of an account held for the first time, in a batch beside accounts that have one', async () => {
    const funded = await tenant(50_000);
    const { db } = database;
    // A tenant that was never credited has no credit row until its first hold.
    const acct = newId('acct_');
    await db.insertInto('accounts').values({ id: acct, created_at: new Date(), suspended_at: null, suspended_reason: null }).execute();
    const fresh: KeyPrincipal = { ...funded, accountId: acct, keyId: 'key_none', parentId: null, chain: [] };
    expect(await db.selectFrom('credit_accounts').select('account_id').where('account_id', '=', acct).executeTakeFirst()).toBeUndefined();
    const results = await Promise.allSettled([hold(funded, 1_000), hold(fresh, 1_000), hold(funded, 2_000), hold(fresh, 0)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ type: 'insufficient_credit' });
    expect(await db.selectFrom('credit_accounts').select(['balance_micro_usd', 'held_micro_usd']).where('account_id', '=', acct).executeTakeFirst()).toBeDefined();
    expect(await metering.position(acct)).toMatchObject({ balance_micro_usd: 0, held_micro_usd: 0 });
    expect(await metering.position(funded.accountId)).toMatchObject({ balance_micro_usd: 50_000, held_micro_usd: 3_000 });
    for (const r of results) if (r.status === 'fulfilled') await metering.release(r.value);
    expect((await metering.position(funded.accountId)).held_micro_usd).toBe(0);
  });

  it('fails only the item whose hold belongs to another account', async () => {
    const a = await tenant(100_000);
    const b = await tenant(100_000);
    const ha = await hold(a, 1_000);
    const hb = await hold(b, 1_000);
    const forged: Hold = { ...hb, accountId: a.accountId, chain: a.chain };
    const [good, bad] = await Promise.allSettled([metering.settle(ha, { costMicroUsd: 700, kind: 'test', units: {} }), metering.settle(forged, { costMicroUsd: 700, kind: 'test', units: {} })]);
    expect(good.status).toBe('fulfilled');
    expect(bad.status).toBe('rejected');
    expect(await metering.position(a.accountId)).toMatchObject({ balance_micro_usd: 99_300, held_micro_usd: 0 });
    expect((await metering.position(b.accountId)).balance_micro_usd).toBe(100_000);
  });
});

describe('credits', () => {
  it('credits a (kind, ref) once, however many credits of it race, from one account or several', async () => {
    const a = await tenant(0);
    const b = await tenant(0);
    const same = await Promise.all(Array.from({ length: 20 }, () => metering.credit(a.accountId, 5_000, 'deposit', 'tx-race-1')));
    expect(same.filter((r) => r.credited)).toHaveLength(1);
    expect(same.every((r) => r.credited || r.balanceMicroUsd >= 0)).toBe(true);
    const across = await Promise.all(Array.from({ length: 10 }, (_, i) => metering.credit((i % 2 ? a : b).accountId, 7_000, 'deposit', 'tx-race-2')));
    expect(across.filter((r) => r.credited)).toHaveLength(1);
    const total = (await metering.position(a.accountId)).balance_micro_usd + (await metering.position(b.accountId)).balance_micro_usd;
    expect(total).toBe(5_000 + 7_000);
    const rows = await database.db.selectFrom('ledger_entries').select('id').where('ref', 'in', ['tx-race-1', 'tx-race-2']).execute();
    expect(rows).toHaveLength(2);
    // Each account's ledger adds up to its balance, entry by entry.
    for (const p of [a, b]) {
      const entries = await database.db.selectFrom('ledger_entries').select(['amount_micro_usd', 'balance_after_micro_usd']).where('account_id', '=', p.accountId).orderBy('id').execute();
      let sum = 0;
      for (const e of entries) expect(Number(e.balance_after_micro_usd)).toBe((sum += Number(e.amount_micro_usd)));
      expect(sum).toBe((await metering.position(p.accountId)).balance_micro_usd);
    }
  });
});
