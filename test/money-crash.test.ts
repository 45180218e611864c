import { afterAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { ManualClock } from '@svc/shared';
import { startTestGateway } from './support/gateway.ts';
import { startChildGateway } from './support/child-gateway.ts';

/**
 * A control-plane process is killed (SIGKILL) while billable requests are in flight. Afterwards every hold
 * is either settled or expires, and each account's balance equals the sum of its ledger.
 */
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe('a process killed mid-request', () => {
  it('leaks no hold and keeps balance = sum(ledger)', async () => {
    const first = await startTestGateway({ persistent: true });
    const share = { databaseUrl: first.databaseUrl, dataDir: first.dataDir };
    const s = await first.signIn();
    await first.gw.services.metering.credit(s.accountId, 1_000_000_000, 'grant', 'crash-test');
    const key = await s.client.createKey();
    await first.stop();

    const { url, kill } = await startChildGateway(share);
    const api = new SvcClient({ baseUrl: url, credential: { kind: 'key', token: key.key } });
    const body = { input_sha256: 'a'.repeat(64), output_sha256: 'b'.repeat(64) };
    let ok = 0;
    const load = Array.from({ length: 8 }, async () => {
      for (;;) {
        const r = await api.raw('POST', '/v1/notary/receipts', { body }).catch(() => null);
        if (!r) return;
        if (r.status === 201) ok++;
      }
    });
    const loadDeadline = Date.now() + 60_000;
    while (ok < 10) {
      if (Date.now() > loadDeadline) throw new Error(`only ${ok} requests settled within 60 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await kill();
    await Promise.all(load);

    // A new process on the same database, an hour later: open holds have expired.
    const clock = new ManualClock(Date.now() + 3600_000);
    const after = await startTestGateway({ share, clock });
    cleanups.push(async () => {
      await after.stop();
      await first.close();
    });
    const db = after.gw.database.db;
    const open = await db.selectFrom('holds').selectAll().execute();
    console.log(`killed with ${open.length} hold(s) open after ${ok} settled requests`);
    expect(await after.gw.leader.runAllOnce()).toBe(true);
    const pos = await db.selectFrom('credit_accounts').selectAll().where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
    const sum = await db.selectFrom('ledger_entries').select((eb) => eb.fn.sum<number>('amount_micro_usd').as('s')).where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
    const events = await db.selectFrom('usage_events').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
    const receipts = await db.selectFrom('receipts').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', s.accountId).executeTakeFirstOrThrow();
    expect(pos.held_micro_usd).toBe(0);
    expect(await db.selectFrom('holds').selectAll().execute()).toEqual([]);
    expect(pos.balance_micro_usd).toBe(Number(sum.s));
    expect(Number(events.n)).toBeGreaterThanOrEqual(ok);
    expect(Number(receipts.n)).toBe(Number(events.n));
    expect(pos.balance_micro_usd).toBe(1_000_000_000 - Number(events.n) * after.gw.config.billing.notaryPriceMicroUsd);
  }, 300_000);
});
