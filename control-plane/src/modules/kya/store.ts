import type { Kysely, Selectable } from 'kysely';
import type { DB, KyaCredentialsTable } from '../../db/schema.ts';

export type KyaRow = Selectable<KyaCredentialsTable>;
export type KyaState = 'active' | 'superseded' | 'revoked';

/** The most a credential list returns, newest first. */
export const KYA_LIST_CAP = 200;

/** revoked, else superseded, else active. */
export function stateOf(r: Pick<KyaRow, 'revoked_at' | 'superseded_at'>): KyaState {
  if (r.revoked_at) return 'revoked';
  if (r.superseded_at) return 'superseded';
  return 'active';
}

/** The kya module's table: credentials over handles, at most one current (not superseded) per handle. */
export class KyaStore {
  constructor(private readonly db: Kysely<DB>) {}

  /** Marks the handle's current credential superseded by `by`; returns its id (null when there was none). */
  async supersede(trx: Kysely<DB>, handle: string, by: string, at: Date): Promise<string | null> {
    const r = await trx
      .updateTable('kya_credentials')
      .set({ superseded_at: at, superseded_by: by })
      .where('handle', '=', handle)
      .where('superseded_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    return r?.id ?? null;
  }

  async insert(trx: Kysely<DB>, row: Omit<KyaRow, 'seq'>): Promise<KyaRow> {
    return trx.insertInto('kya_credentials').values(row).returningAll().executeTakeFirstOrThrow();
  }

  async list(accountId: string): Promise<KyaRow[]> {
    return this.db.selectFrom('kya_credentials').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(KYA_LIST_CAP).execute();
  }

  async owned(accountId: string, id: string): Promise<KyaRow | undefined> {
    return this.db.selectFrom('kya_credentials').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  }

  /** Sets revoked_at once (a second revocation keeps the first time); returns the row. */
  async revoke(accountId: string, id: string, at: Date): Promise<KyaRow | undefined> {
    await this.db.updateTable('kya_credentials').set({ revoked_at: at }).where('account_id', '=', accountId).where('id', '=', id).where('revoked_at', 'is', null).execute();
    return this.owned(accountId, id);
  }

  /** The handle's current credential (not superseded), revoked or not. */
  async current(handle: string): Promise<KyaRow | undefined> {
    return this.db.selectFrom('kya_credentials').selectAll().where('handle', '=', handle).where('superseded_at', 'is', null).executeTakeFirst();
  }
}
