/**
 * Money path bench: hold + settle throughput and latency on the real Postgres server, against a
 * baseline of bare `UPDATE ... RETURNING` round trips measured in the same run, plus receipt signing rate.
 *   npx tsx bench/money.ts [--requests 4000] [--pg postgres://postgres@127.0.0.1:5432/postgres]
 */
import { postgresCpuSeconds } from './cpu.ts';
import { percentile } from './load.ts';
import pg from 'pg';
import { sql } from 'kysely';
import { generatePrivateKey, nativeSigning, newId, randomId, systemClock } from '@svc/shared';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { migrateToLatest } from '../control-plane/src/db/migrate.ts';
import { Metering } from '../control-plane/src/modules/money/metering.ts';
import { ReceiptSigner } from '../control-plane/src/modules/money/signer.ts';
import type { KeyPrincipal } from '../control-plane/src/http/auth-types.ts';
import { arg } from './args.ts';

const TOTAL = Number(arg('requests', '4000'));
const ADMIN = arg('pg', 'postgres://postgres@127.0.0.1:5432/postgres');

const ms = (x: number) => `${x.toFixed(3)} ms`;

/** CPU seconds used so far by this process and by every postgres process on the machine (Linux /proc). */
function cpuNow(): { self: number; pg: number } {
  const u = process.cpuUsage();
  return { self: (u.user + u.system) / 1e6, pg: postgresCpuSeconds() };
}

async function runConcurrent(n: number, total: number, op: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < total) await op(next++);
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function main() {
  const name = `svc_bench_${randomId(8)}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const database = await openDatabase({ databaseUrl: url.toString() });
  try {
    const { db } = database;
    await migrateToLatest(db);
    const signer = new ReceiptSigner(generatePrivateKey());
    const billing = {
      enforced: true, holdTtlSeconds: 900, leaseSeconds: 60, settleBehind: false, breakerWindowSeconds: 60, breakerLimitMicroUsd: 100_000_000, notaryPriceMicroUsd: 1000, // the deployment defaults (breaker on)
      treasury: '0x1111111111111111111111111111111111111111', usdtContract: '0x2222222222222222222222222222222222222222', usdtDecimals: 6, network: 'base',
    };
    const metering = new Metering(db, systemClock, signer, billing);
    // Write-behind (inference over HTTP): each settle answered once its pending row is committed, stored after.
    const behind = new Metering(db, systemClock, signer, { ...billing, settleBehind: true }, { processId: database.processId, asyncCommit: database.asyncCommit });

    // Receipt signing rate (one core).
    const payload = { v: 1 as const, id: 'req_x', kind: 'bench', account_id: 'acct_x', key_id: 'key_x', usage_event_id: 'ue_x', route: 'POST /bench', model: null, units: { n: 1 }, cost_micro_usd: 1000, created_at: new Date().toISOString(), run: null, policy: null };
    const usual = new ReceiptSigner(generatePrivateKey(), { preparedNonces: false });
    let signs = 0;
    const s0 = performance.now();
    while (performance.now() - s0 < 1000) {
      usual.signReceipt({ ...payload, id: `req_${signs}` });
      signs++;
    }
    const signRate = signs / ((performance.now() - s0) / 1000);
    await usual.close();
    // Inline with nonces the worker prepared: as many as its pool holds.
    await signer.warm();
    const ready = signer.ready;
    const p0 = performance.now();
    for (let i = 0; i < ready; i++) signer.signReceipt({ ...payload, id: `req_p${i}` });
    const preparedRate = ready / ((performance.now() - p0) / 1000);

    // Baseline: bare UPDATE ... RETURNING round trips on a counter row per caller.
    await sql`create table bench_counter (id int primary key, n bigint not null)`.execute(db);
    await sql`insert into bench_counter select g, 0 from generate_series(0, 63) g`.execute(db);

    console.log(`money path bench: ${TOTAL} operations per row, real Postgres (${name}), pool of 20 connections`);
    console.log(`receipt signing incl. canonical JSON and hashing (${nativeSigning ? 'libsecp256k1 native binding' : '@noble/curves'}, one core): ${signRate.toFixed(0)} receipts/s with RFC 6979 nonces; ${preparedRate.toFixed(0)} receipts/s inline with nonces prepared on the worker (${ready} in a row)`);
    console.log('');
    console.log('callers | baseline UPDATE/s | settled req/s | ratio | hold p50 / p99 | settle p50 / p99 | write-behind req/s (all stored) | ratio | its settle p50 / p99 (to the answer)');
    const cpuRows: string[] = [];
    for (const callers of [1, 16, 64]) {
      const baseSecs = await runConcurrent(callers, TOTAL, async (i) => {
        await sql`update bench_counter set n = n + 1 where id = ${i % callers} returning n`.execute(db);
      });
      // One account and key per caller: realistic tenants, no shared hot row.
      const principals: KeyPrincipal[] = [];
      for (let c = 0; c < callers; c++) {
        const acct = newId('acct_');
        const key = newId('key_');
        await db.insertInto('accounts').values({ id: acct, created_at: new Date(), suspended_at: null, suspended_reason: null }).execute();
        await db
          .insertInto('api_keys')
          .values({ id: key, account_id: acct, parent_id: null, name: null, prefix: 'x', secret_hash: randomId(40), scopes: '[]', spend_cap_micro_usd: null, created_at: new Date(), expires_at: null, revoked_at: null, frozen_at: null, frozen_reason: null, rotated_to: null, last_used_at: null })
          .execute();
        await metering.credit(acct, 1_000_000_000, 'grant', `bench-${acct}`);
        principals.push({ kind: 'key', accountId: acct, keyId: key, parentId: null, chain: [key], scopes: [], spendCapMicroUsd: null, expiresAt: null });
      }
      const holdLat: number[] = [];
      const settleLat: number[] = [];
      let c = 0;
      let leased = 0;
      const cpu0 = cpuNow();
      const secs = await runConcurrent(callers, TOTAL, async () => {
        const p = principals[c++ % callers]!;
        const h0 = performance.now();
        const hold = await metering.hold({ principal: p, requestId: newId('req_', 20), runId: null, maxCostMicroUsd: 5000, route: 'POST /bench', resource: 'bench' });
        const h1 = performance.now();
        if (hold.lease) leased++;
        await metering.settle(hold, { costMicroUsd: 1000, kind: 'bench', units: { n: 1 } });
        const h2 = performance.now();
        holdLat.push(h1 - h0);
        settleLat.push(h2 - h1);
      });
      const cpu1 = cpuNow();
      // The same with write-behind settles: answered once the pending row committed; the time runs until every one is stored.
      const behindLat: number[] = [];
      let b = 0;
      const bt0 = performance.now();
      await runConcurrent(callers, TOTAL, async () => {
        const p = principals[b++ % callers]!;
        const hold = await behind.hold({ principal: p, requestId: newId('req_', 20), runId: null, maxCostMicroUsd: 5000, route: 'POST /bench', resource: 'bench' });
        const h1 = performance.now();
        await behind.settle(hold, { costMicroUsd: 1000, kind: 'bench', units: { n: 1 } }, { behind: true });
        behindLat.push(performance.now() - h1);
      });
      await behind.settledAll();
      const behindRate = TOTAL / ((performance.now() - bt0) / 1000);
      cpuRows.push(`${String(callers).padStart(7)} | ${((cpu1.self - cpu0.self) / TOTAL * 1e6).toFixed(0).padStart(16)} µs | ${((cpu1.pg - cpu0.pg) / TOTAL * 1e6).toFixed(0).padStart(16)} µs | ${((leased / TOTAL) * 100).toFixed(1).padStart(5)} %`);
      const base = TOTAL / baseSecs;
      const rate = TOTAL / secs;
      console.log(
        `${String(callers).padStart(7)} | ${base.toFixed(0).padStart(17)} | ${rate.toFixed(0).padStart(13)} | ${(rate / base).toFixed(2).padStart(5)} | ${ms(percentile(holdLat, 50))} / ${ms(percentile(holdLat, 99))} | ${ms(percentile(settleLat, 50))} / ${ms(percentile(settleLat, 99))} | ${behindRate.toFixed(0).padStart(31)} | ${(behindRate / base).toFixed(2).padStart(5)} | ${ms(percentile(behindLat, 50))} / ${ms(percentile(behindLat, 99))}`,
      );
    }
    console.log('');
    console.log('callers | bench process CPU/req | postgres CPU/req (all backends; 10 ms ticks) | holds admitted from a credit lease');
    for (const r of cpuRows) console.log(r);
    const check = await sql<{ bad: number }>`
      select count(*)::int as bad from credit_accounts c
      where c.balance_micro_usd <> (select coalesce(sum(amount_micro_usd), 0) from ledger_entries l where l.account_id = c.account_id) or c.held_micro_usd <> 0
         or c.leased_micro_usd <> (select coalesce(sum(amount_micro_usd), 0) from holds h where h.account_id = c.account_id and h.lease)`.execute(db);
    console.log('');
    console.log(`round trips on the request path: at most 1 for the hold (none when admitted from a credit lease), 1 for the settle, each shared with the requests batched beside it (key auth is cached); write-behind: 1 for the pending row (a group commit), the settle stored after the answer.`);
    console.log(`ledger invariant violations after the run (balance != sum of ledger, held != 0, or leased != the lease rows): ${check.rows[0]?.bad}`);
    await behind.close();
    await signer.close();
  } finally {
    await database.close();
    await admin.query(`drop database ${name} with (force)`);
    await admin.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
