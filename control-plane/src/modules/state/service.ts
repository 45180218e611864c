import type { Kysely } from 'kysely';
import { Sealer, ServiceError, canonicalize, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { IdentityService } from '../identity/service.ts';
import { checkConditions, type Conditions } from './conditions.ts';
import { STATE_KEYS_PER_ACCOUNT, STATE_LIST_CAP, STATE_VALUE_MAX_BYTES, nonFinitePath } from './names.ts';
import { accountKeyCount, deleteValue, insertValue, listKeys, lockValue, readValue, updateValue, versionFloor, type Place, type StateMeta } from './store.ts';

export interface StateDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  identity: IdentityService;
}

const notFound = (p: Place) =>
  new ServiceError('not_found', `No state value at key ${JSON.stringify(p.key)} in namespace ${JSON.stringify(p.namespace)}`, { key: p.key, namespace: p.namespace });

/**
 * Durable state: JSON values an account keeps under (namespace, key), sealed at rest. Every value carries a
 * version that each write increments, for compare-and-set (If-Match, If-None-Match). A key created anew
 * starts above every version the account has deleted, so a version never names two different values of one
 * key. Writers of one key run one at a time on its row lock; creations of one account run one at a time on
 * the account lock, so the per-account key limit holds under concurrency. Not billed.
 */
export class StateService {
  private readonly sealer: Sealer;

  constructor(private readonly d: StateDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  /** Bound to the value's place and version: a sealed value read anywhere else fails to open. */
  private aad(p: Place, version: number): string {
    return `state:${p.accountId}:${p.namespace}:${version}:${p.key}`;
  }

  /** Writes a value; `created` says whether the key was absent (201) or replaced (200). */
  async put(p: Place, value: unknown, cond: Conditions): Promise<{ created: boolean; meta: StateMeta }> {
    const bad = nonFinitePath(value);
    if (bad !== null) throw new ServiceError('invalid_request', `body.value${bad}: a number out of range of a double (JSON has no Infinity)`, { param: `value${bad}` });
    const text = canonicalize(value);
    const size = Buffer.byteLength(text, 'utf8');
    if (size > STATE_VALUE_MAX_BYTES) {
      throw new ServiceError('payload_too_large', `body.value: ${size} bytes of canonical JSON (RFC 8785); a value is at most ${STATE_VALUE_MAX_BYTES} bytes`, {
        param: 'value',
        size,
        limit_bytes: STATE_VALUE_MAX_BYTES,
      });
    }
    const now = this.d.clock.now();
    return this.d.db.transaction().execute(async (trx) => {
      let row = await lockValue(trx, p);
      if (!row && cond.ifMatch === undefined) {
        // Creations of one account run one at a time from here, so the key limit holds under concurrency;
        // one that committed while this waited is then found and replaced (or refused by If-None-Match).
        await this.d.identity.lockAccount(trx, p.accountId);
        row = await lockValue(trx, p);
      }
      checkConditions(cond, row ? Number(row.version) : undefined);
      if (row) {
        const version = Number(row.version) + 1;
        const meta = await updateValue(trx, p, { version, value_sealed: this.sealer.seal(text, this.aad(p, version)), size, updated_at: now });
        return { created: false, meta };
      }
      const n = await accountKeyCount(trx, p.accountId);
      if (n >= STATE_KEYS_PER_ACCOUNT) {
        throw new ServiceError('conflict', `An account holds at most ${STATE_KEYS_PER_ACCOUNT} state keys across its namespaces and this one holds ${n}; delete one first (replacing an existing key is always allowed)`, {
          reason: 'state_key_limit',
          limit: STATE_KEYS_PER_ACCOUNT,
        });
      }
      const version = (await versionFloor(trx, p.accountId)) + 1;
      const meta = await insertValue(trx, {
        account_id: p.accountId,
        namespace: p.namespace,
        key: p.key,
        version,
        value_sealed: this.sealer.seal(text, this.aad(p, version)),
        size,
        created_at: now,
        updated_at: now,
      });
      return { created: true, meta };
    });
  }

  async get(p: Place): Promise<{ meta: StateMeta; value: unknown }> {
    const row = await readValue(this.d.db, p);
    if (!row) throw notFound(p);
    const { value_sealed, ...meta } = row;
    const text = this.sealer.open(value_sealed, this.aad(p, Number(row.version))).toString('utf8');
    return { meta, value: JSON.parse(text) as unknown };
  }

  /** Deletes a value (its version, as deleted, is returned); 404 when absent, whatever the conditions. */
  async delete(p: Place, cond: Conditions): Promise<StateMeta> {
    return this.d.db.transaction().execute(async (trx) => {
      const row = await lockValue(trx, p);
      if (!row) throw notFound(p);
      checkConditions(cond, Number(row.version));
      await deleteValue(trx, p, Number(row.version));
      return row;
    });
  }

  /** The namespace's keys in byte order, without values: complete up to STATE_LIST_CAP, then truncated. */
  async list(accountId: string, namespace: string) {
    const { rows, total } = await listKeys(this.d.db, accountId, namespace, STATE_LIST_CAP);
    return { rows, count: total, truncated: total > rows.length };
  }
}
