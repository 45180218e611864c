import type { Kysely } from 'kysely';
import type { DB } from './schema.ts';

/**
 * The storage backends: a pg pool on a real Postgres server (DATABASE_URL), or embedded PGlite in the
 * data directory. Both speak the same SQL, run the same migrations and give the same value types:
 * BIGINT as a JS number (money is integer micro-USD, far below 2^53), timestamptz as Date.
 */
export interface Database {
  db: Kysely<DB>;
  kind: 'postgres' | 'pglite';
  /**
   * This process's name on the server (`svc_p_<hex>`): its LISTEN connection carries it as application_name,
   * so other processes can tell whether it is still there (`processesAlive`).
   */
  processId: string;
  /** Which of these process ids still have their LISTEN connection open (pglite: only this process's own). */
  processesAlive(ids: readonly string[]): Promise<Set<string>>;
  /**
   * A one-statement write on a connection of its own, prepared once, committed with synchronous_commit off:
   * it survives this process dying the moment it returns, not a crash of the server itself (the hot path's
   * pending settles). Postgres only; undefined on the embedded database, whose WAL lives in this process.
   */
  asyncCommit?: (name: string, text: string, values: unknown[]) => Promise<void>;
  /** Subscribe to a NOTIFY channel; returns an unsubscribe function. */
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  /** Try to take the process-wide advisory lock for leadership; true while held. */
  leaderLock: LeaderLock;
  close(): Promise<void>;
}

export interface LeaderLock {
  tryAcquire(): Promise<boolean>;
  /** Resolves false once a held lock has been lost (its connection died). */
  isHeld(): Promise<boolean>;
  release(): Promise<void>;
}

/** The advisory lock key of leadership, on either backend. */
export const LEADER_LOCK_KEY = 727_001;

/**
 * The setting every connection of a process carries, set to its `processId` (a custom setting, not
 * application_name, which names the connections that tell other processes this one is alive): triggers read it to
 * record which process wrote a row (nodes.changed_by).
 */
export const WRITER_SETTING = 'svc.writer';

/** BIGINT as a JS number: money is integer micro-USD, far below 2^53; a larger value is an error, never rounded. */
export const parseBigint = (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`BIGINT value ${v} exceeds the safe integer range`);
  return n;
};
