import type { FastifyBaseLogger } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { SCHEDULER_RETURNING, type SchedulerRow } from './registry-view.ts';
import { KeyedSerial } from './serial.ts';
import { WriteBatch } from './write-batch.ts';

/**
 * `nodes.channel_process`: which control-plane process holds each node's agent channel (with several
 * processes on one Postgres). Written when a channel attaches, cleared when it detaches (only if it still
 * names this process: the agent may already be on another one), in order per node.
 *
 * `nodes.channel_epoch` records the agent's number for that connection (later connections have larger
 * ones). A process never writes itself over the record of a later connection: when the agent went away
 * without a close reaching this process (the network dropped, the agent's host died) and came back on another
 * one, this process's channel looks open until its keepalive gives up (up to 30 s), and until then its
 * writes (`reassert`) would send the node's jobs to a connection nobody is on. A record nobody holds (null),
 * one naming a process that is gone (an agent whose clock went back since numbers its connections lower than
 * the one that process recorded), and the connections of agents that do not number them are written as before.
 */
export class ChannelRecord {
  private readonly writes = new KeyedSerial();
  /**
   * The records of channels that attach while one such write commits go in one statement (a reconnecting fleet
   * attaches thousands of channels within seconds); still one after another per node (`writes`).
   */
  private readonly holds = new WriteBatch<string, number | null, true>(
    async (items) => {
      await this.take(items.map((i) => ({ nodeId: i.key, connection: i.value })), false);
      return new Map(items.map((i) => [i.key, true as const]));
    },
    (nodeId) => new Error(`no channel record written for ${nodeId}`),
  );

  constructor(
    private readonly db: Kysely<DB>,
    /** This process (`Database.processId`). */
    private readonly self: string,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
    /** Which of these processes are gone: missing at two checks in a row (FleetRelay.goneCheck, this record's own). */
    private readonly gone: (processIds: string[]) => Promise<Set<string>>,
    /** The rows each write changed, as committed (the scheduler's view takes this process's own writes so: RegistryView.written). */
    private readonly written: (rows: SchedulerRow[]) => void = () => undefined,
  ) {}

  held(nodeId: string, connection: number | null = null): Promise<void> {
    return this.write(nodeId, () => this.holds.add(nodeId, connection));
  }

  released(nodeId: string): Promise<void> {
    return this.write(nodeId, () => this.releases.add(nodeId, null));
  }

  /** Releases that come while one commits go in one statement too (a fleet whose agents leave together). */
  private readonly releases = new WriteBatch<string, null, true>(
    async (items) => {
      const ids = items.map((i) => i.key);
      this.written((await sql<SchedulerRow>`update nodes n set channel_process = null where id = any(${ids}::text[]) and channel_process = ${this.self} returning ${SCHEDULER_RETURNING}`.execute(this.db)).rows);
      return new Map(ids.map((id) => [id, true as const]));
    },
    (nodeId) => new Error(`no channel release written for ${nodeId}`),
  );

  /**
   * Puts right the records of channels held here that another process overwrote late (its write of a
   * channel it had lost), unless that record is of a later connection of the agent.
   */
  async reassert(held: Array<{ nodeId: string; connection: number | null }>): Promise<void> {
    if (held.length) await this.take(held, true);
    // Still another's: taken anyway from a process gone at two reasserts in a row (nobody else would ever put
    // the record right).
    const others = held.length
      ? (
          await sql<{ id: string; channel_process: string; channel_epoch: string | null }>`
            select id, channel_process, channel_epoch from nodes
            where id = any(${held.map((h) => h.nodeId)}::text[]) and channel_process is not null and channel_process <> ${this.self}`.execute(this.db)
        ).rows
      : [];
    const gone = await this.gone([...new Set(others.map((o) => o.channel_process))]); // none: what it counted is forgotten
    for (const o of others) {
      if (!gone.has(o.channel_process)) continue;
      const connection = held.find((h) => h.nodeId === o.id)!.connection;
      const taken = await sql<SchedulerRow>`
        update nodes n set channel_process = ${this.self}, channel_epoch = ${connection === null ? null : String(connection)}::bigint
        where id = ${o.id} and channel_process = ${o.channel_process} and channel_epoch is not distinct from ${o.channel_epoch}::bigint
        returning ${SCHEDULER_RETURNING}`.execute(this.db);
      this.written(taken.rows);
    }
  }

  /**
   * Names this process in the records of these channels, except over the record of a later connection of the
   * agent (free and unnumbered records, and unnumbered connections, always write). `othersOnly`: only records
   * that name another process or none.
   */
  private async take(held: Array<{ nodeId: string; connection: number | null }>, othersOnly: boolean): Promise<void> {
    const taken = await sql<SchedulerRow>`
      update nodes n set channel_process = ${this.self}, channel_epoch = h.connection
      from unnest(${held.map((h) => h.nodeId)}::text[], ${held.map((h) => (h.connection === null ? null : String(h.connection)))}::bigint[]) as h(id, connection)
      where n.id = h.id ${othersOnly ? sql`and (n.channel_process is null or n.channel_process <> ${this.self})` : sql``}
        and (h.connection is null or n.channel_process is null or n.channel_epoch is null or n.channel_epoch <= h.connection)
      returning ${SCHEDULER_RETURNING}`.execute(this.db);
    this.written(taken.rows);
  }

  /** The process holding the node's channel, by the record, and the agent's number for that connection. */
  async holder(nodeId: string): Promise<{ channel: string | null; channelEpoch: number | null }> {
    const row = await this.db.selectFrom('nodes').select(['channel_process', 'channel_epoch']).where('id', '=', nodeId).executeTakeFirst();
    return { channel: row?.channel_process ?? null, channelEpoch: row?.channel_epoch == null ? null : Number(row.channel_epoch) };
  }

  idle(): Promise<void> {
    return this.writes.idle();
  }

  private write(nodeId: string, run: () => Promise<unknown>): Promise<void> {
    return this.writes.run(nodeId, run).then(
      () => undefined,
      (e: unknown) => this.log().error({ err: e, node_id: nodeId }, 'could not record which process holds a node channel'),
    );
  }
}
