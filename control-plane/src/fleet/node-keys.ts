import type { Kysely } from 'kysely';
import { ServiceError, sha256Hex, type Clock } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import type { NodePrincipal } from '../http/auth-types.ts';

/**
 * How long a node key's answer is trusted without asking the database: the period of the registry's full read,
 * which drops the keys of suspended owners too. A suspension reaches every process at once (the keys' NOTIFY,
 * `drop`); this bounds a notification that never came.
 */
export const NODE_KEY_TRUST_MS = 300_000;

interface Known {
  nodeId: string;
  accountId: string;
  at: number;
}

/**
 * Node-key auth (heartbeats and the agent channel) without a database read per heartbeat: the keys of nodes whose
 * owner is not suspended, learned from the registry's full reads and from each lookup, each trusted for
 * NODE_KEY_TRUST_MS. Only successes are kept: an unknown key, or one of a suspended owner, is asked of the database
 * every time. Node keys are never revoked (the spec has none); an owner's suspension is the one change, and it
 * drops that owner's keys here (`drop`, called with every key invalidation of the account, from this process and
 * from others by NOTIFY). A read that began before a drop teaches nothing: it may have read the owner unsuspended.
 */
export class NodeKeys {
  private readonly known = new Map<string, Known>();
  /** Bumped by every drop; a read that saw another value when it began teaches nothing. */
  private generation = 0;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly max = 200_000,
  ) {}

  /** The token a read takes when it begins (`learn` and `replace` take it back). */
  begin(): number {
    return this.generation;
  }

  /** Keys one lookup read, kept unless a drop came since `token`. */
  private learn(token: number, keyHash: string, nodeId: string, accountId: string): void {
    if (token !== this.generation) return;
    if (this.known.size >= this.max) this.known.clear();
    this.known.set(keyHash, { nodeId, accountId, at: this.clock.now().getTime() });
  }

  /** Every key a full read found (its nodes' owners unsuspended), in place of what was kept. */
  replace(token: number, rows: Iterable<{ keyHash: string; nodeId: string; accountId: string }>): void {
    if (token !== this.generation) return;
    const at = this.clock.now().getTime();
    this.known.clear();
    for (const r of rows) this.known.set(r.keyHash, { nodeId: r.nodeId, accountId: r.accountId, at });
  }

  /** A key invalidation ("account:<id>" for an account's change, such as a suspension; key ids concern API keys only). */
  drop(target: string): void {
    if (!target.startsWith('account:')) return;
    const account = target.slice('account:'.length);
    this.generation++;
    for (const [h, k] of this.known) if (k.accountId === account) this.known.delete(h);
  }

  /**
   * The node a key acts as. An unknown key is 401 `invalid_credential`, which the agent treats as fatal (exit 3);
   * a suspended owner is 403 `account_suspended`, which the agent waits out (it keeps retrying with backoff).
   */
  async authenticate(secret: string): Promise<NodePrincipal> {
    const hash = sha256Hex(secret);
    const k = this.known.get(hash);
    if (k && this.clock.now().getTime() - k.at < NODE_KEY_TRUST_MS) return { kind: 'node', nodeId: k.nodeId, accountId: k.accountId };
    if (k) this.known.delete(hash);
    const token = this.begin();
    const row = await this.db
      .selectFrom('nodes as n')
      .innerJoin('accounts as a', 'a.id', 'n.account_id')
      .select(['n.id', 'n.account_id', 'a.suspended_at'])
      .where('n.key_hash', '=', hash)
      .executeTakeFirst();
    if (!row) throw new ServiceError('invalid_credential', 'Unknown node key');
    if (row.suspended_at) throw new ServiceError('account_suspended', "This node key is refused while the node's owner account is suspended");
    this.learn(token, hash, row.id, row.account_id);
    return { kind: 'node', nodeId: row.id, accountId: row.account_id };
  }
}
