import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock } from '@svc/shared';
import { up as spanFromReceipts } from '../control-plane/src/db/migrations/20261201_4300_run_span_from_receipts.ts';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { notarize, notaryAccount, type ProofBody, type RunBody } from './support/notary.ts';

/**
 * A clock that moves one millisecond each time it is read, as a real one moves between signing a receipt and
 * settling it: the settle's time is never the receipt's.
 */
class TickingClock extends ManualClock {
  override now(): Date {
    const at = super.now();
    this.advance(1);
    return at;
  }
}

/** A run proof's span is recomputed from the run's signed receipts: the first receipt's created_at to the newest's. */
let t: TestGateway;
let A: Awaited<ReturnType<typeof notaryAccount>>;
beforeAll(async () => {
  t = await startTestGateway({ clock: new TickingClock(Date.now()), env: { ...ENFORCED_BILLING, SVC_NOTARY_PRICE_MICRO_USD: '1000' } });
  A = await notaryAccount(t);
  for (let i = 0; i < 3; i++) {
    await notarize(A.api, 'run-span');
    t.clock.advance(1_000);
  }
});
afterAll(async () => t?.close());

const expectSpanOfReceipts = async (runId: string) => {
  const run = await A.client.request<RunBody>('GET', `/v1/runs/${runId}`);
  const first = run.receipts[0]!.payload.created_at as string;
  const last = run.receipts.at(-1)!.payload.created_at as string;
  expect({ first_at: run.first_at, last_at: run.last_at }).toEqual({ first_at: first, last_at: last });
  const p = await A.client.request<ProofBody>('POST', `/v1/runs/${runId}/proof`);
  expect(p.proof.span).toEqual({ first_at: first, last_at: last, seconds: (Date.parse(last) - Date.parse(first)) / 1000 });
  const listed = await A.client.request<{ runs: Array<Pick<RunBody, 'id' | 'first_at' | 'last_at'>> }>('GET', '/v1/runs');
  expect(listed.runs.find((r) => r.id === runId)).toMatchObject({ first_at: first, last_at: last });
};

describe('run span', () => {
  it("is the signed created_at of the run's first and newest receipts, in the run, its proof and the list", async () => {
    await expectSpanOfReceipts('run-span');
  });

  it('runs recorded before are set from their receipts by the migration', async () => {
    const db = t.gw.database.db;
    await sql`update runs set first_at = first_at + interval '7 ms', last_at = last_at + interval '3 ms' where id = 'run-span'`.execute(db);
    const moved = await A.client.request<RunBody>('GET', '/v1/runs/run-span');
    expect(moved.first_at).not.toBe(moved.receipts[0]!.payload.created_at);
    await spanFromReceipts(db);
    await expectSpanOfReceipts('run-span');
  });
});
