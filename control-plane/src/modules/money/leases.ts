import { sql, type Kysely } from 'kysely';
import { newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';

/**
 * Credit leases, this process's side (migration 0700 is the database's). A lease is credit (and room under
 * every limit of one key chain) that the database set aside for this process; requests of that chain are
 * admitted from it in memory, and each settle takes its cost out of the lease row in the settle's own
 * transaction. Locally a lease tracks what the database granted and what requests in flight reserved;
 * `granted - reserved` is free for the next request.
 *
 * Life of a lease: asked for by a request's own hold (at most one at a time per chain, the others hold in the
 * database meanwhile); topped up in the background once less than half of what was wanted is free; given
 * back when its keys change (revocation, freeze, rotation, a cap: KeysService's invalidation), when another
 * process or a debit needs the credit (NOTIFY svc_leases), after `idleMs` without use, and at shutdown. The
 * process renews the leases it keeps; a process that dies leaves them to expire like holds.
 */
export interface LeaseSettings {
  /** Lease lifetime in the database; renewed while in use. 0 turns leases off. */
  ttlSeconds: number;
  /** A lease asks for this many of the asking request's amount. */
  wantRequests: number;
  /** An unused lease is given back after this long. */
  idleMs: number;
}

export interface Lease {
  id: string;
  account: string;
  chain: string[];
  granted: number;
  reserved: number;
  want: number;
  expiresAt: number;
  lastUsed: number;
  topping: boolean;
  topUpAfter: number;
  retired: boolean;
  /** The database call giving it back, while one is on its way. */
  returning: Promise<void> | null;
}

/** What a hold item carries to ask for a lease or top one up. */
export interface LeaseAsk {
  id: string;
  fresh: boolean;
  want: number;
  only?: boolean;
}

/** NOTIFY channel (payload: an account id) asking processes to give that account's leases back. */
export const LEASES_CHANNEL = 'svc_leases';

const chainKey = (account: string, chain: string[]) => `${account}|${chain.join(',')}`;
const monotonic = () => performance.now();

export class CreditLeases {
  private readonly live = new Map<string, Lease>();
  private readonly byId = new Map<string, Lease>();
  private readonly asking = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    readonly settings: LeaseSettings,
  ) {}

  get enabled(): boolean {
    return this.settings.ttlSeconds > 0;
  }

  private usable(l: Lease): boolean {
    return !l.retired && this.clock.now().getTime() < l.expiresAt - (this.settings.ttlSeconds * 1000) / 4;
  }

  /** Reserves `amount` from this chain's live lease; null when there is none or it has no room. */
  reserve(account: string, chain: string[], amount: number): Lease | null {
    const l = this.live.get(chainKey(account, chain));
    if (!l || !this.usable(l) || l.granted - l.reserved < amount) return null;
    l.reserved += amount;
    l.lastUsed = monotonic();
    return l;
  }

  /** A lease request for a hold going to the database, unless one for this chain is already on its way. */
  ask(account: string, chain: string[], amount: number): LeaseAsk | null {
    const key = chainKey(account, chain);
    if (amount <= 0 || this.asking.has(key)) return null;
    const l = this.live.get(key);
    if (l?.topping) return null;
    this.asking.add(key);
    const want = amount * this.settings.wantRequests;
    return l && this.usable(l) ? { id: l.id, fresh: false, want } : { id: newId('lease_', 20), fresh: true, want };
  }

  /**
   * The answer to `ask` (outcome of the hold that carried it). `granted` includes the request's own amount.
   * 'lost': granted to a lease this process closed meanwhile (its keys changed), so the close gave the grant
   * back too and the request must hold again.
   */
  answered(account: string, chain: string[], ask: LeaseAsk, granted: number, amount: number, gone: boolean): Lease | null | 'lost' {
    const key = chainKey(account, chain);
    this.asking.delete(key);
    let l = this.byId.get(ask.id);
    if (gone && l) void this.retire(l);
    if (granted <= 0) return null;
    if (!ask.fresh && !l) return 'lost';
    const expiresAt = this.clock.now().getTime() + this.settings.ttlSeconds * 1000;
    if (!l) {
      const previous = this.live.get(key);
      if (previous) this.retire(previous);
      l = { id: ask.id, account, chain, granted: 0, reserved: 0, want: ask.want, expiresAt, lastUsed: monotonic(), topping: false, topUpAfter: 0, retired: false, returning: null };
      this.live.set(key, l);
      this.byId.set(l.id, l);
      this.startTimer();
    }
    l.granted += granted;
    l.reserved += amount;
    l.expiresAt = expiresAt;
    l.want = ask.want;
    if (l.retired) void this.retire(l);
    return l;
  }

  /** Whether this lease should be topped up now (and marks it so); the caller sends the top-up. */
  topUpDue(l: Lease): LeaseAsk | null {
    if (l.retired || l.topping || l.granted - l.reserved >= l.want / 2 || monotonic() < l.topUpAfter) return null;
    l.topping = true;
    return { id: l.id, fresh: false, want: l.want, only: true };
  }

  /** The answer to a top-up: `granted` more credit, or none (then no top-up for a second). */
  toppedUp(l: Lease, granted: number, gone: boolean): void {
    l.topping = false;
    if (gone) {
      void this.retire(l);
      return;
    }
    if (granted > 0) {
      l.granted += granted;
      l.expiresAt = this.clock.now().getTime() + this.settings.ttlSeconds * 1000;
      if (l.retired) void this.retire(l);
    } else {
      l.topUpAfter = monotonic() + 1000;
    }
  }

  /** A request admitted from lease `id` ended: `cost` was charged out of the lease (0 when released). */
  finished(id: string, reservedAmount: number, cost: number): Promise<void> | undefined {
    const l = this.byId.get(id);
    if (!l) return;
    l.granted -= cost;
    l.reserved -= reservedAmount;
    l.lastUsed = monotonic();
    // The last request of a retired lease closes it; the caller waits, so the credit is back when it answers.
    if (l.retired && l.reserved <= 0) return this.retire(l);
  }

  /** Gives back the leases whose chain contains this key, or all of an account's ("account:<id>"). */
  dropFor(target: string): void {
    const account = target.startsWith('account:') ? target.slice(8) : null;
    for (const l of [...this.live.values()]) if (account ? l.account === account : l.chain.includes(target)) void this.retire(l);
  }

  /** Gives back this account's leases and waits until the database has them back (also those already on their way). */
  async returnAccount(accountId: string): Promise<void> {
    const mine = [...this.byId.values()].filter((l) => l.account === accountId);
    await Promise.all(mine.map((l) => this.retire(l)));
  }

  /** Whether this process holds leased credit of the account (live, or retired and not yet closed). */
  hasLeases(accountId: string): boolean {
    for (const l of this.byId.values()) if (l.account === accountId) return true;
    return false;
  }

  private retire(l: Lease): Promise<void> {
    if (!l.retired) {
      l.retired = true;
      if (this.live.get(chainKey(l.account, l.chain)) === l) this.live.delete(chainKey(l.account, l.chain));
    }
    const before = l.returning ?? Promise.resolve();
    // A give-back that fails (the database unreachable) leaves the credit to come back when the lease expires.
    const call = before.then(() => (l.reserved <= 0 ? this.close(l) : this.giveBack(l))).catch(() => undefined);
    l.returning = call;
    void call.finally(() => {
      if (l.returning === call) l.returning = null;
    });
    return call;
  }

  /** Gives back what a retired lease has not reserved; it closes when its last request ends. */
  private async giveBack(l: Lease): Promise<void> {
    const free = l.granted - l.reserved;
    if (free <= 0) return;
    l.granted -= free;
    await this.returnLeases([{ id: l.id, ret: free, close: false }]);
  }

  private async close(l: Lease): Promise<void> {
    if (!this.byId.delete(l.id)) return;
    await this.returnLeases([{ id: l.id, ret: 0, close: true }]);
  }

  private async returnLeases(items: Array<{ id: string; ret: number; close: boolean }>): Promise<void> {
    await sql`select svc_lease_return(${JSON.stringify(items)}::jsonb, ${this.clock.now()})`.execute(this.db);
  }

  /** Housekeeping, once a second: give back idle leases and renew the others before they expire. */
  async tick(): Promise<void> {
    const now = this.clock.now().getTime();
    const renew: Lease[] = [];
    for (const l of [...this.live.values()]) {
      const idle = l.reserved <= 0 && !l.topping && !this.asking.has(chainKey(l.account, l.chain)) && monotonic() - l.lastUsed >= this.settings.idleMs;
      if (idle) void this.retire(l);
      else if (now >= l.expiresAt - (this.settings.ttlSeconds * 1000) / 2) renew.push(l);
    }
    if (renew.length === 0) return;
    const expires = new Date(now + this.settings.ttlSeconds * 1000);
    const r = await sql<{ ids: string[] }>`select svc_lease_renew(${renew.map((l) => l.id)}::text[], ${expires}) as ids`.execute(this.db);
    const kept = new Set(r.rows[0]?.ids ?? []);
    for (const l of renew) {
      if (kept.has(l.id)) l.expiresAt = expires.getTime();
      else void this.retire(l); // expired and released by the leader: nothing left to give back
    }
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick().catch(() => undefined), 1000);
    this.timer.unref();
  }

  /** Gives every lease back (shutdown); leases with requests in flight close when those end or expire. */
  async closeAll(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await Promise.all([...this.live.values()].map((l) => this.retire(l)));
  }
}
