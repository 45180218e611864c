import type { Kysely } from 'kysely';
import { newId, type Clock } from '@svc/shared';
import type { McpConfig } from '../../config/mcp.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { countSessions, deleteSession, findSession, insertSession, purgeSessions, touchSession, trimSessions } from './store.ts';

/** The identity module's account lock: per-account limits of other modules hold under concurrency. */
export interface AccountLock {
  lockAccount(db: Kysely<DB>, accountId: string): Promise<void>;
}

/**
 * Sessions of the remote MCP server in stateful mode. A session is a row (no content), so any process of the
 * deployment serves it; it belongs to the API key that opened it (another key's request gets the same 404
 * as an unknown id), lives while used within the idle window, and a key holds at most `sessionsPerKey`:
 * opening one more ends the key's least recently used session, whose client then initializes again (404).
 */
export class McpSessions {
  /** last_used_at is written at most this often per session (an idle window of 30 min moves in 1 min steps). */
  private readonly touchEveryMs: number;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly lock: AccountLock,
    private readonly cfg: McpConfig,
  ) {
    this.touchEveryMs = Math.min(60_000, Math.floor(cfg.sessionIdleMs / 30));
  }

  get stateful(): boolean {
    return this.cfg.sessions === 'stateful';
  }

  private liveSince(): Date {
    return new Date(this.clock.now().getTime() - this.cfg.sessionIdleMs);
  }

  /** Opens a session for the key; the key's sessions beyond the cap (least recently used first) end. */
  async open(p: KeyPrincipal, protocolVersion: string | null): Promise<string> {
    const id = newId('mcps_', 32);
    const at = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await this.lock.lockAccount(trx, p.accountId); // two opens at the cap run one after the other
      await insertSession(trx, { id, account_id: p.accountId, key_id: p.keyId, protocol_version: protocolVersion, at });
      await trimSessions(trx, p.keyId, this.cfg.sessionsPerKey, this.liveSince());
    });
    return id;
  }

  /** Whether the session is live and the key's; marks it used. */
  async use(p: KeyPrincipal, id: string): Promise<boolean> {
    if (id.length > 128) return false;
    const row = await findSession(this.db, id);
    if (!row || row.key_id !== p.keyId || row.account_id !== p.accountId) return false;
    const now = this.clock.now();
    if (row.last_used_at.getTime() <= now.getTime() - this.cfg.sessionIdleMs) return false;
    if (now.getTime() - row.last_used_at.getTime() >= this.touchEveryMs) await touchSession(this.db, id, now);
    return true;
  }

  /** Ends a session of the key (DELETE); false when there was none. */
  close(p: KeyPrincipal, id: string): Promise<boolean> {
    return id.length > 128 ? Promise.resolve(false) : deleteSession(this.db, id, p.keyId);
  }

  /** Deletes sessions past the idle window (leader loop). */
  purgeIdle(): Promise<number> {
    return purgeSessions(this.db, this.liveSince());
  }

  count(keyId: string): Promise<number> {
    return countSessions(this.db, keyId, this.liveSince());
  }
}
