import type { FastifyBaseLogger } from 'fastify';
import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { KeyedSerial } from './serial.ts';

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
   * Processes named by records of channels held here, by how many reasserts in a row found them gone (one miss
   * may be a LISTEN connection reconnecting; see FleetRelay.gone).
   */
  private readonly missing = new Map<string, number>();

  constructor(
    private readonly db: Kysely<DB>,
    /** This process (`Database.processId`). */
    private readonly self: string,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
    /** Which of these processes are still there (`Database.processesAlive`). */
    private readonly alive: (processIds: string[]) => Promise<Set<string>>,
  ) {}

  held(nodeId: string, connection: number | null = null): Promise<void> {
    return this.write(nodeId, () =>
      this.db
        .updateTable('nodes')
        .set({ channel_process: this.self, channel_epoch: connection })
        .where('id', '=', nodeId)
        .where((eb) => this.notLater(eb, connection))
        .execute(),
    );
  }

  released(nodeId: string): Promise<void> {
    return this.write(nodeId, () => this.db.updateTable('nodes').set({ channel_process: null }).where('id', '=', nodeId).where('channel_process', '=', this.self).execute());
  }

  /**
   * Puts right the records of channels held here that another process overwrote late (its write of a
   * channel it had lost), unless that record is of a later connection of the agent.
   */
  async reassert(held: Array<{ nodeId: string; connection: number | null }>): Promise<void> {
    if (!held.length) return this.missing.clear();
    const ids = held.map((h) => h.nodeId);
    const connections = held.map((h) => (h.connection === null ? null : String(h.connection)));
    await sql`
      update nodes n set channel_process = ${this.self}, channel_epoch = h.connection
      from unnest(${ids}::text[], ${connections}::bigint[]) as h(id, connection)
      where n.id = h.id and (n.channel_process is null or n.channel_process <> ${this.self})
        and (h.connection is null or n.channel_process is null or n.channel_epoch is null or n.channel_epoch <= h.connection)`.execute(this.db);
    // Still another's: taken anyway from a process gone at two reasserts in a row (nobody else would ever put
    // the record right).
    const others = (
      await sql<{ id: string; channel_process: string; channel_epoch: string | null }>`
        select id, channel_process, channel_epoch from nodes where id = any(${ids}::text[]) and channel_process is not null and channel_process <> ${this.self}`.execute(this.db)
    ).rows;
    const named = [...new Set(others.map((o) => o.channel_process))];
    for (const p of [...this.missing.keys()]) if (!named.includes(p)) this.missing.delete(p);
    if (!named.length) return;
    const alive = await this.alive(named);
    for (const p of named) this.missing.set(p, alive.has(p) ? 0 : (this.missing.get(p) ?? 0) + 1);
    for (const o of others) {
      if ((this.missing.get(o.channel_process) ?? 0) < 2) continue;
      const connection = held.find((h) => h.nodeId === o.id)!.connection;
      await sql`
        update nodes set channel_process = ${this.self}, channel_epoch = ${connection === null ? null : String(connection)}::bigint
        where id = ${o.id} and channel_process = ${o.channel_process} and channel_epoch is not distinct from ${o.channel_epoch}::bigint`.execute(this.db);
    }
  }

  /** The record is free, unnumbered, or of this connection or an earlier one (an unnumbered connection may always write). */
  private notLater(eb: ExpressionBuilder<DB, 'nodes'>, connection: number | null) {
    if (connection === null) return eb.lit(true);
    return eb.or([eb('channel_process', 'is', null), eb('channel_epoch', 'is', null), eb('channel_epoch', '<=', String(connection))]);
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
