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
  private readonly sending = new Map<string, Promise<void>>();
  private onMessage: ((from: string, m: RelayMessage) => void) | null = null;
  private draining: Promise<void> | null = null;
  private again = false;
  private unlisten: (() => Promise<void>) | null = null;
  private poll: NodeJS.Timeout | null = null;

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
    const before = this.sending.get(m.job) ?? Promise.resolve();
    const sent = before.catch(() => undefined).then(() => this.insert(to, m));
    const tail = sent.catch(() => undefined);
    this.sending.set(m.job, tail);
    void tail.then(() => {
      if (this.sending.get(m.job) === tail) this.sending.delete(m.job);
    });
    return sent;
  }

  /** Which of these processes are connected to the database now. */
  alive(ids: readonly string[]): Promise<Set<string>> {
    return this.database.processesAlive(ids);
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
    await Promise.all([...this.sending.values()]);
    await this.draining;
    this.onMessage = null;
  }

  private async insert(to: string, m: RelayMessage): Promise<void> {
    await sql`
      with m as (insert into fleet_messages(receiver, sender, body) values (${to}, ${this.self}, ${JSON.stringify(m)}) returning id)
      select pg_notify(${FleetRelay.channel(to)}, '') from m`.execute(this.database.db);
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
