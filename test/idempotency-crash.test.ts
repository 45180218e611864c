import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient, type ApiError } from '@svc/shared/client';
import { OWNER_GONE_AFTER_MS } from '../control-plane/src/http/idempotency.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * A sandbox run's Idempotency-Key whose process died mid-run (its row left in progress). While the process
 * is alive a retry is refused as still running; once it is gone from the database (missing at two checks
 * OWNER_GONE_AFTER_MS apart) a retry takes the key over and runs once, and of two retries at once one runs.
 * On Postgres the owner is a second control-plane process on the same database, then closed; the embedded
 * database serves one process, so there the owner is a process that is not connected.
 */
const enabled = sandboxImage();

let t: TestGateway & { databaseUrl: string | undefined; dataDir: string };
let agent: TestAgent;
let api: SvcClient;
let accountId: string;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway();
  const owner = await t.signIn();
  accountId = owner.accountId;
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'idempotency-crash');
  const key = await owner.client.createKey({ scopes: ['sandboxes'] });
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE });
  await until('sandbox agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
});

type Run = { id: string; stdout: string; replayed?: boolean };
const run = (body: Record<string, unknown>, key: string) => api.request<Run>('POST', '/v1/sandboxes', { body, headers: { 'idempotency-key': key } });
const runs = async () => Number((await t.gw.database.db.selectFrom('sandbox_runs').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow()).n);
const row = (key: string) => t.gw.database.db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', accountId).where('key', '=', key).executeTakeFirstOrThrow();

/** Leaves `key` as a process that died mid-run would: in progress, owned by a process that is now gone. */
async function diedMidRun(body: Record<string, unknown>, key: string): Promise<void> {
  await run(body, key); // the row gets the exact body digest the route computes
  const other = t.databaseUrl ? await startTestGateway({ share: { databaseUrl: t.databaseUrl, dataDir: t.dataDir }, clock: t.clock }) : null;
  const processId = other?.gw.database.processId ?? 'svc_p_00000000000000ff';
  await t.gw.database.db
    .updateTable('idempotency_keys')
    .set({ state: 'in_progress', status_code: null, response: null, headers: null, process_id: processId })
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .execute();
  if (other) {
    // Alive: its request is still running.
    await expectApiError(run(body, key), 409, 'idempotency_conflict');
    expect((await row(key)).owner_missed_at).toBeNull();
    await other.stop();
  }
}

describe.skipIf(!enabled)('an Idempotency-Key whose process died', () => {
  it('a retry runs once the process is gone, once', async () => {
    const body = { language: 'sh', code: 'echo retried' };
    await diedMidRun(body, 'crash-1');
    const before = await runs();
    // First miss: it may be a connection reopening, so not yet.
    const first = await expectApiError(run(body, 'crash-1'), 409, 'idempotency_conflict');
    expect(first.body?.error.retry_after).toBe(OWNER_GONE_AFTER_MS / 1000);
    await expectApiError(run(body, 'crash-1'), 409, 'idempotency_conflict');
    expect(await runs()).toBe(before);
    t.clock.advance(OWNER_GONE_AFTER_MS);
    const retried = await run(body, 'crash-1');
    expect(retried.stdout).toBe('retried\n');
    expect(retried.replayed).toBeUndefined();
    expect(await runs()).toBe(before + 1);
    expect(await row('crash-1')).toMatchObject({ state: 'done', process_id: t.gw.database.processId });
    // Later retries replay the retry's answer.
    const replay = await run(body, 'crash-1');
    expect(replay).toMatchObject({ id: retried.id, replayed: true });
    expect(await runs()).toBe(before + 1);
  }, 120_000);

  it('of two retries at once, one runs', async () => {
    const body = { language: 'sh', code: 'sleep 1; echo raced' };
    await diedMidRun(body, 'crash-2');
    await expectApiError(run(body, 'crash-2'), 409, 'idempotency_conflict');
    t.clock.advance(OWNER_GONE_AFTER_MS);
    const before = await runs();
    const both = await Promise.allSettled([run(body, 'crash-2'), run(body, 'crash-2')]);
    const ran = both.filter((r) => r.status === 'fulfilled' && !r.value.replayed);
    expect(ran).toHaveLength(1);
    for (const r of both) if (r.status === 'rejected') expect((r.reason as ApiError).type).toBe('idempotency_conflict');
    expect(await runs()).toBe(before + 1);
    expect((await row('crash-2')).state).toBe('done');
  }, 120_000);

  it('a process that is alive keeps its key', async () => {
    const body = { language: 'sh', code: 'echo mine' };
    await run(body, 'alive-1');
    await t.gw.database.db.updateTable('idempotency_keys').set({ state: 'in_progress', process_id: t.gw.database.processId }).where('account_id', '=', accountId).where('key', '=', 'alive-1').execute();
    const before = await runs();
    await expectApiError(run(body, 'alive-1'), 409, 'idempotency_conflict');
    t.clock.advance(OWNER_GONE_AFTER_MS);
    await expectApiError(run(body, 'alive-1'), 409, 'idempotency_conflict');
    expect(await runs()).toBe(before);
    expect((await row('alive-1')).owner_missed_at).toBeNull();
  });
});
