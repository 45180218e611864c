import { describe, expect, it } from 'vitest';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { FleetRelay } from './relay.ts';
import { RelayedJobs } from './relayed-jobs.ts';
import { JobClaims } from './claims.ts';

describe('JobClaims', () => {
  it('a job nobody owns is an orphan; a failed lookup is not (the job is asked about again, not cancelled)', async () => {
    const database = await openDatabase({ memory: true });
    await migrateToLatest(database.db);
    const relayed = new RelayedJobs(new FleetRelay(database, () => undefined), () => false, () => ({ error: () => undefined }), 1000);
    const claims = new JobClaims(database.db, 'svc_p_self', relayed, { attached: () => true, known: () => false, cancel: () => undefined });
    expect(await claims.claim('node_1', 'job_unknown')).toBeNull();
    await database.close();
    expect(await claims.claim('node_1', 'job_unknown')).toBeNull(); // remembered: no query
    expect(await claims.claim('node_1', 'job_x')).toBeUndefined(); // the lookup failed: not known
    expect(await claims.claim('node_1', 'job_x')).toBeUndefined(); // asked again, not remembered as nobody's
  });
});
