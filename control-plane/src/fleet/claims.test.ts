import { describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { FleetRelay } from './relay.ts';
import { RelayedJobs } from './relayed-jobs.ts';
import { JobClaims } from './claims.ts';

/** A fresh embedded database holding node_1 and these open jobs of it, dispatched by svc_p_origin. */
async function withJobs(jobIds: string[]) {
  const database = await openDatabase({ memory: true });
  await migrateToLatest(database.db);
  await sql`insert into accounts (id, created_at) values ('acct_1', now())`.execute(database.db);
  await sql`insert into nodes (id, account_id, kinds, key_hash, key_prefix, created_at) values ('node_1', 'acct_1', '[]', 'h', 'p', now())`.execute(database.db);
  for (const id of jobIds) {
    await sql`insert into jobs (id, node_id, kind, status, created_at, origin_process) values (${id}, 'node_1', 'diag.wait', 'dispatched', now(), 'svc_p_origin')`.execute(database.db);
  }
  return database;
}

describe('JobClaims', () => {
  it('a job nobody owns is an orphan; a failed lookup is not (the job is asked about again, not cancelled)', async () => {
    const database = await openDatabase({ memory: true });
    await migrateToLatest(database.db);
    const relayed = new RelayedJobs(new FleetRelay(database, () => undefined), () => false, () => ({ error: () => undefined }), 1000);
    const claims = new JobClaims(database.db, 'svc_p_self', relayed, { attached: () => true, connection: () => null, known: () => false, cancel: () => undefined });
    expect(await claims.claim('node_1', 'job_unknown')).toBeNull();
    await database.close();
    expect(await claims.claim('node_1', 'job_unknown')).toBeNull(); // remembered: no query
    expect(await claims.claim('node_1', 'job_x')).toBeUndefined(); // the lookup failed: not known
    expect(await claims.claim('node_1', 'job_x')).toBeUndefined(); // asked again, not remembered as nobody's
  });

  it("tells the origin the latest connection that reported the job during the lookup (the agent came back on a later one)", async () => {
    const database = await withJobs(['job_1']);
    try {
      const relayed = new RelayedJobs(new FleetRelay(database, () => undefined), () => true, () => ({ error: () => undefined }), 1000);
      const claims = new JobClaims(database.db, database.processId, relayed, { attached: () => true, connection: () => 7, known: () => false, cancel: () => undefined });
      // The hello of connection 5 starts the lookup; connection 7's hello (the agent left and came back here,
      // its new channel replacing the old one: no detach) joins it before it answers.
      const first = claims.running('node_1', ['job_1'], 5);
      const again = claims.running('node_1', ['job_1'], 7);
      expect(await Promise.all([first, again])).toEqual([[], []]);
      const sent = await database.db.selectFrom('fleet_messages').select(['receiver', 'body']).execute();
      expect(sent.map((m) => ({ to: m.receiver, m: JSON.parse(m.body) as unknown }))).toEqual([{ to: 'svc_p_origin', m: { t: 'moved', job: 'job_1', connection: 7 } }]);
      expect(relayed.list()).toEqual([{ jobId: 'job_1', nodeId: 'node_1', origin: 'svc_p_origin' }]);
    } finally {
      await database.close();
    }
  });

  it("the end of a channel during the lookup drops the claims of its connection and earlier ones, not a later connection's (its hello came before its channel); that one waits in the grace until its channel is here", async () => {
    const database = await withJobs(['job_1', 'job_2']);
    try {
      const relayed = new RelayedJobs(new FleetRelay(database, () => undefined), () => true, () => ({ error: () => undefined }), 60_000);
      const claims = new JobClaims(database.db, database.processId, relayed, { attached: () => false, connection: () => undefined, known: () => false, cancel: () => undefined });
      // Connection 10's hello names job_1, connection 11's names job_2 (its channel not here yet); 10's channel ends.
      const on10 = claims.running('node_1', ['job_1'], 10);
      const on11 = claims.running('node_1', ['job_2'], 11);
      claims.detached('node_1', 10);
      expect(await Promise.all([on10, on11])).toEqual([[], []]);
      expect(relayed.list()).toEqual([{ jobId: 'job_2', nodeId: 'node_1', origin: 'svc_p_origin' }]);
      const sent = async () => (await database.db.selectFrom('fleet_messages').select('body').orderBy('id').execute()).map((m) => JSON.parse(m.body) as unknown);
      await vi.waitFor(async () =>
        expect(await sent()).toEqual([
          { t: 'moved', job: 'job_2', connection: 11 },
          { t: 'dropped', job: 'job_2', why: 'the channel of node node_1 dropped', counts: true },
        ]),
      );
      relayed.close(); // its grace timer
    } finally {
      await database.close();
    }
  });
});
