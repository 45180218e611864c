import { sql } from 'kysely';
import type { JobFinish, JobOutput } from '@svc/shared';
import type { Database } from '../db/database.ts';

/**
 * Messages between control-plane processes about a job on a node whose agent channel another process holds.
 * The origin (the process that dispatched the job and owns its record) sends `job` and `cancel`; the holder
 * (the process the agent is connected to) answers `accepted` or `refused`, then relays the agent's `output`
 * and `finish`, or `lost` when the agent's channel dropped and did not come back in time.
 */
export type RelayMessage =
  | { t: 'job'; job: string; node: string; kind: string; payload: unknown; timeout_ms: number }
  | { t: 'cancel'; job: string; reason: string }
  | { t: 'accepted'; job: string }
  | { t: 'refused'; job: string; why: string }
  | { t: 'output'; job: string; o: JobOutput }
  | { t: 'finish'; job: string; f: JobFinish }
  | { t: 'lost'; job: string; why: string };

/** NOTIFY payloads must stay under 8000 bytes; a larger message waits in `fleet_spill`. */
const INLINE_MAX_BYTES = 7000;
/** Spilled messages nobody read (their receiver died) are deleted after this long. */
const SPILL_TTL = '10 minutes';

type Envelope = { f: string; m: RelayMessage } | { f: string; s: number };

/**
 * The transport between control-plane processes (ARCHITECTURE decision 2): Postgres NOTIFY on a channel of
 * each process (`svc_fleet_<process id>`). Messages about one job are sent one after another (each NOTIFY
 * commits before the next is sent, so they arrive in order), and received one at a time in arrival order.
 */
export class FleetRelay {
  private readonly sending = new Map<string, Promise<void>>();
  private inbox: Promise<void> = Promise.resolve();
  private unlisten: (() => Promise<void>) | null = null;

  constructor(
    private readonly database: Database,
    private readonly onError: (e: unknown, what: string) => void,
  ) {}

  get self(): string {
    return this.database.processId;
  }

  static channel(processId: string): string {
    return `svc_fleet_${processId}`;
  }

  async start(onMessage: (from: string, m: RelayMessage) => void): Promise<void> {
    await sql`delete from fleet_spill where created_at < now() - ${SPILL_TTL}::interval`.execute(this.database.db);
    this.unlisten = await this.database.listen(FleetRelay.channel(this.self), (payload) => {
      this.inbox = this.inbox.then(() => this.receive(payload, onMessage)).catch((e: unknown) => this.onError(e, 'a relay message could not be read'));
    });
  }

  /** Sends `m` to process `to`, after the messages about the same job sent before it. */
  send(to: string, m: RelayMessage): Promise<void> {
    const before = this.sending.get(m.job) ?? Promise.resolve();
    const sent = before.catch(() => undefined).then(() => this.notify(to, m));
    const tail = sent.catch(() => undefined);
    this.sending.set(m.job, tail);
    void tail.then(() => {
      if (this.sending.get(m.job) === tail) this.sending.delete(m.job);
    });
    return sent;
  }

  /** Which of these processes are still connected to the database. */
  alive(ids: readonly string[]): Promise<Set<string>> {
    return this.database.processesAlive(ids);
  }

  async close(): Promise<void> {
    await this.unlisten?.();
    this.unlisten = null;
    await Promise.all([...this.sending.values()]);
  }

  private async notify(to: string, m: RelayMessage): Promise<void> {
    const db = this.database.db;
    const inline = JSON.stringify({ f: this.self, m } satisfies Envelope);
    if (Buffer.byteLength(inline) <= INLINE_MAX_BYTES) {
      await sql`select pg_notify(${FleetRelay.channel(to)}, ${inline})`.execute(db);
      return;
    }
    await sql`
      with s as (insert into fleet_spill(body) values (${JSON.stringify(m)}) returning id)
      select pg_notify(${FleetRelay.channel(to)}, json_build_object('f', ${this.self}::text, 's', s.id)::text) from s`.execute(db);
  }

  private async receive(payload: string, onMessage: (from: string, m: RelayMessage) => void): Promise<void> {
    const e = JSON.parse(payload) as Envelope;
    if ('m' in e) return onMessage(e.f, e.m);
    const row = await this.database.db.deleteFrom('fleet_spill').where('id', '=', e.s).returning('body').executeTakeFirst();
    if (row) onMessage(e.f, JSON.parse(row.body) as RelayMessage);
  }
}
