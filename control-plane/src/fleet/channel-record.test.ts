import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { ChannelRecord } from './channel-record.ts';
import { FleetRelay } from './relay.ts';

describe('ChannelRecord', () => {
  let database: Database;
  const log = () => ({ error: (o: object) => expect.fail(`unexpected error: ${JSON.stringify(o)}`) });
  const record = async () => (await database.db.selectFrom('nodes').select(['channel_process', 'channel_epoch']).where('id', '=', 'node_1').executeTakeFirstOrThrow());
  const at = async () => {
    const r = await record();
    return [r.channel_process, r.channel_epoch === null ? null : Number(r.channel_epoch)];
  };

  beforeAll(async () => {
    database = await openDatabase({ memory: true });
    await migrateToLatest(database.db);
    await sql`insert into accounts (id, created_at) values ('acct_1', now())`.execute(database.db);
    await sql`insert into nodes (id, account_id, kinds, key_hash, key_prefix, created_at) values ('node_1', 'acct_1', '[]', 'h', 'p', now())`.execute(database.db);
  });
  afterAll(() => database.close());

  it("no process writes itself over the record of the agent's later connection; a free record, a gone process's and unnumbered agents are written as before", async () => {
    // The embedded database knows one process alive: its own. P stands for a live process, Q and R for gone ones.
    const relay = new FleetRelay(database, () => undefined);
    const [p, q, r] = [database.processId, 'svc_p_gone_1', 'svc_p_gone_2'].map((id) => new ChannelRecord(database.db, id, log, relay.goneCheck()));
    const P = database.processId;
    await p!.held('node_1', 5000);
    expect(await at()).toEqual([P, 5000]);
    // A process holding an earlier connection (its close never reached it) neither takes the record at attach
    // (a late write) nor on its periodic reassert.
    await q!.held('node_1', 4000);
    await q!.reassert([{ nodeId: 'node_1', connection: 4000 }]);
    expect(await at()).toEqual([P, 5000]);
    // A later connection does.
    await q!.reassert([{ nodeId: 'node_1', connection: 6000 }]);
    expect(await at()).toEqual(['svc_p_gone_1', 6000]);
    await r!.held('node_1', 5500);
    expect(await at()).toEqual(['svc_p_gone_1', 6000]);
    // The record of a process that is gone is taken whatever the number (an agent whose clock went back since
    // numbers its connections lower, and nobody else would put the record right), once it was gone at two
    // reasserts in a row (one miss may be its LISTEN connection reconnecting).
    await p!.reassert([{ nodeId: 'node_1', connection: 10 }]);
    expect(await at()).toEqual(['svc_p_gone_1', 6000]);
    await p!.reassert([]); // holding nothing for a while: the absence it counted is forgotten
    await p!.reassert([{ nodeId: 'node_1', connection: 10 }]);
    expect(await at()).toEqual(['svc_p_gone_1', 6000]);
    await p!.reassert([{ nodeId: 'node_1', connection: 10 }]);
    expect(await at()).toEqual([P, 10]);
    // Released by its holder, the record is free: anyone holding the node takes it.
    await q!.released('node_1'); // not q's: no change
    expect(await at()).toEqual([P, 10]);
    await p!.released('node_1');
    expect((await at())[0]).toBeNull();
    await r!.reassert([{ nodeId: 'node_1', connection: 7 }]);
    expect(await at()).toEqual(['svc_p_gone_2', 7]);
    // An agent that does not number its connections is recorded as before, and anyone may write over it.
    await p!.held('node_1', null);
    expect(await at()).toEqual([P, null]);
    await q!.reassert([{ nodeId: 'node_1', connection: 1 }]);
    expect(await at()).toEqual(['svc_p_gone_1', 1]);
    await r!.held('node_1', null);
    expect(await at()).toEqual(['svc_p_gone_2', null]);
  });

  it('channels of several nodes held and released at once (one round each): a release frees only the records naming its process', async () => {
    const ids = ['node_a', 'node_b', 'node_c'];
    for (const id of ids) await sql`insert into nodes (id, account_id, kinds, key_hash, key_prefix, created_at) values (${id}, 'acct_1', '[]', ${'h' + id}, 'p', now())`.execute(database.db);
    const relay = new FleetRelay(database, () => undefined);
    const [p, q] = [database.processId, 'svc_p_gone_3'].map((id) => new ChannelRecord(database.db, id, log, relay.goneCheck()));
    await Promise.all([p!.held('node_a', 1), p!.held('node_b', 1), q!.held('node_c', 1)]);
    await Promise.all([p!.released('node_a'), p!.released('node_b'), p!.released('node_c')]);
    const rows = await database.db.selectFrom('nodes').select(['id', 'channel_process']).where('id', 'in', ids).orderBy('id').execute();
    expect(rows).toEqual([
      { id: 'node_a', channel_process: null },
      { id: 'node_b', channel_process: null },
      { id: 'node_c', channel_process: 'svc_p_gone_3' }, // not this process's to release
    ]);
  });
});
