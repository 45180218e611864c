import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { KeyedSerial } from './serial.ts';

/**
 * `nodes.channel_process`: which control-plane process holds each node's agent channel (with several
 * processes on one Postgres). Written when a channel attaches, cleared when it detaches (only if it still
 * names this process: the agent may already be on another one), in order per node.
 */
export class ChannelRecord {
  private readonly writes = new KeyedSerial();

  constructor(
    private readonly db: Kysely<DB>,
    /** This process (`Database.processId`). */
    private readonly self: string,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
  ) {}

  held(nodeId: string): Promise<void> {
    return this.write(nodeId, () => this.db.updateTable('nodes').set({ channel_process: this.self }).where('id', '=', nodeId).execute());
  }

  released(nodeId: string): Promise<void> {
    return this.write(nodeId, () => this.db.updateTable('nodes').set({ channel_process: null }).where('id', '=', nodeId).where('channel_process', '=', this.self).execute());
  }

  /** Puts right the records of channels held here that another process overwrote late (its write of a channel it had lost). */
  async reassert(nodeIds: string[]): Promise<void> {
    if (!nodeIds.length) return;
    await this.db
      .updateTable('nodes')
      .set({ channel_process: this.self })
      .where('id', 'in', nodeIds)
      .where((eb) => eb.or([eb('channel_process', 'is', null), eb('channel_process', '!=', this.self)]))
      .execute();
  }

  /** The process holding the node's channel, by the record. */
  async holder(nodeId: string): Promise<string | null> {
    const row = await this.db.selectFrom('nodes').select('channel_process').where('id', '=', nodeId).executeTakeFirst();
    return row?.channel_process ?? null;
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
