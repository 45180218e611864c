import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Database } from '../../db/database.ts';
import type { DenylistCheck } from '../../http/body.ts';

const CHANNEL = 'svc_denylist';

/**
 * Payload denylist by full sha256. Stores digests only, never content. Every process keeps the set in
 * memory (so screening costs no round trip) and reloads it when any process adds a digest (NOTIFY).
 */
export class DenylistService implements DenylistCheck {
  private set = new Set<string>();
  private unlisten: (() => Promise<void>) | undefined;
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
  ) {}

  async start(database: Database): Promise<void> {
    await this.reload();
    this.unlisten = await database.listen(CHANNEL, () => void this.reload().catch(() => undefined));
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
  }

  has(sha256: string): boolean {
    return this.set.has(sha256);
  }

  async reload(): Promise<void> {
    const rows = await this.db.selectFrom('denylist').select('sha256').execute();
    this.set = new Set(rows.map((r) => r.sha256));
  }

  async add(sha256: string, reason: string | null): Promise<{ sha256: string; created: boolean; created_at: string }> {
    const digest = sha256.toLowerCase();
    const now = this.clock.now();
    const inserted = await this.db
      .insertInto('denylist')
      .values({ sha256: digest, reason, created_at: now })
      .onConflict((oc) => oc.column('sha256').doNothing())
      .returning('created_at')
      .executeTakeFirst();
    this.set.add(digest);
    await this.db.selectNoFrom((eb) => eb.fn('pg_notify', [eb.val(CHANNEL), eb.val(digest)]).as('n')).execute();
    const row = inserted ?? (await this.db.selectFrom('denylist').select('created_at').where('sha256', '=', digest).executeTakeFirstOrThrow());
    return { sha256: digest, created: inserted !== undefined, created_at: row.created_at.toISOString() };
  }
}
