import { sql } from 'kysely';
import type { JobFinish, JobOutput } from '@svc/shared';
import type { Database } from '../db/database.ts';
import { goneCheck } from '../db/gone-check.ts';
import { KeyedSerial } from './serial.ts';

/**
 * Messages between control-plane processes about a job on a node whose agent channel another process holds.
 * The origin (the process that dispatched the job and owns its record) sends `job` and `cancel`; the holder
 * (the process the agent is connected to) answers `accepted` or `refused` (never passed to an agent: safe to
 * run elsewhere), then relays the agent's `output` and `finish`. When the holder's channel to the agent drops
 * it says `dropped` (the origin waits the reconnect grace; `counts`: against the node if it runs out, not when
 * the holder was shutting down); wherever the agent comes back with the job, that process says `moved` and
 * relays it from then on; an agent back on the holder without the job, or not back within the grace, makes it `lost`.
 * The origin says `hold` when the job's consumer (a slow caller) cannot take more output, and `go` when it can:
 * meanwhile the holder keeps the agent's next outputs back (a process from before these ignores both).
 * A job that takes input (a terminal) gets it as `input`, origin to holder, in `seq` order, passed on to the
 * agent; the agent acknowledges input in the job's output, and the origin sends no more than a window of input
 * unacknowledged, so no process queues more than that (AgentHub.input).
 */
export type RelayMessage =
  | { t: 'job'; job: string; node: string; kind: string; payload: unknown; timeout_ms: number; idle_timeout_ms?: number }
  | { t: 'cancel'; job: string; reason: string }
  | { t: 'accepted'; job: string; connection?: number | null }
  | { t: 'refused'; job: string; why: string }
  | { t: 'output'; job: string; o: JobOutput }
  | { t: 'finish'; job: string; f: JobFinish }
  | { t: 'dropped'; job: string; why: string; counts: boolean }
  | { t: 'moved'; job: string; connection?: number | null }
  | { t: 'lost'; job: string; why: string }
  | { t: 'hold'; job: string }
  | { t: 'go'; job: string }
  | { t: 'input'; job: string; seq: number; input: unknown };

/** The inbox is also read this often without a NOTIFY (one missed while the LISTEN connection reconnected). */
const POLL_MS = 3000;
/** Messages nobody read (their receiver is gone) are deleted after this long. */
const UNREAD_TTL = '10 minutes';

/**
 * The transport between control-plane processes (ARCHITECTURE decision 2). A message is a row of
 * `fleet_messages` addressed to its receiver; a NOTIFY on the receiver's channel (`svc_fleet_<process id>`)
 * wakes it, and it deletes and handles everything addressed to it, in id order. Messages about one job are
 * sent one after another (each committed before the next is inserted), so they are handled in the order sent.
 * The NOTIFY carries nothing: whoever can send one only makes the receiver look at its own rows.
 */
export class FleetRelay {
  private readonly sending = new KeyedSerial();
  private onMessage: ((from: string, m: RelayMessage) => void) | null = null;
  private draining: Promise<void> | null = null;
  private again = false;
  private unlisten: (() => Promise<void>) | null = null;
  private poll: NodeJS.Timeout | null = null;
  /** Which of these peers are gone (see goneCheck): the relay's own check, for the jobs relayed to and from them. */
  readonly gone = this.goneCheck();

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
    this.onMessage = onMessage;
    this.unlisten = await this.database.listen(FleetRelay.channel(this.self), () => void this.drain());
    this.poll = setInterval(() => void this.drain(), POLL_MS);
    this.poll.unref();
    await this.drain();
  }

  /** Sends `m` to process `to`, after the messages about the same job sent before it. */
  send(to: string, m: RelayMessage): Promise<void> {
    return this.sending.run(m.job, () => this.insert(to, [m]));
  }

  /** Sends messages about one job to `to` in one write, in order, after those about it sent before. */
  sendAll(to: string, job: string, ms: RelayMessage[]): Promise<void> {
    return this.sending.run(job, () => this.insert(to, ms));
  }

  /**
   * Sends about one job to `to` whatever `take` gives when its turn comes (after the messages about the job sent
   * before it): what was gathered meanwhile goes in one write.
   */
  sendGathered(to: string, job: string, take: () => RelayMessage[]): Promise<void> {
    return this.sending.run(job, async () => {
      const ms = take();
      if (ms.length > 0) await this.insert(to, ms);
    });
  }

  /** Writes of messages this process made (each one statement, of one message or several). */
  writes = 0;

  /** Which of these processes are connected to the database now. */
  alive(ids: readonly string[]): Promise<Set<string>> {
    return this.database.processesAlive(ids);
  }

  /** A check of which peers are gone (db/gone-check.ts): each periodic check keeps its own count. */
  goneCheck(): (peers: readonly string[]) => Promise<Set<string>> {
    return goneCheck((ids) => this.alive(ids));
  }

  /** Deletes messages addressed to processes that never read them. */
  async sweep(): Promise<void> {
    await sql`delete from fleet_messages where created_at < now() - ${UNREAD_TTL}::interval`.execute(this.database.db);
  }

  /** Reads and handles every message addressed to this process; a call during a read runs one more after it. */
  drain(): Promise<void> {
    if (this.draining) {
      this.again = true;
      return this.draining;
    }
    this.draining = (async () => {
      do {
        this.again = false;
        try {
          await this.readInbox();
        } catch (e) {
          this.onError(e, 'relay messages could not be read');
        }
      } while (this.again && this.onMessage);
    })().finally(() => (this.draining = null));
    return this.draining;
  }

  async close(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    await this.unlisten?.();
    this.unlisten = null;
    await this.sending.idle();
    await this.draining;
    this.onMessage = null;
  }

  /** One statement: the messages as rows in order (ids ascending, which is the order they are read in) and one NOTIFY. */
  private async insert(to: string, ms: RelayMessage[]): Promise<void> {
    this.writes++;
    const bodies = JSON.stringify(ms.map((m) => JSON.stringify(m)));
    await sql`
      with m as (
        insert into fleet_messages(receiver, sender, body)
        select ${to}, ${this.self}, b from json_array_elements_text(${bodies}::json) with ordinality as x(b, n) order by n
        returning id)
      select pg_notify(${FleetRelay.channel(to)}, '') from (select count(*) from m) c`.execute(this.database.db);
  }

  private async readInbox(): Promise<void> {
    if (!this.onMessage) return;
    const rows = await this.database.db.deleteFrom('fleet_messages').where('receiver', '=', this.self).returning(['id', 'sender', 'body']).execute();
    rows.sort((a, b) => a.id - b.id);
    for (const r of rows) {
      let m: RelayMessage;
      try {
        m = JSON.parse(r.body) as RelayMessage;
      } catch (e) {
        this.onError(e, 'a relay message was not JSON');
        continue;
      }
      this.onMessage?.(r.sender, m);
    }
  }
}
