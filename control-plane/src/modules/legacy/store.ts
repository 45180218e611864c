import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB, LegacyObjectsTable, LegacyPartiesTable, LegacyPlansTable } from '../../db/schema.ts';

export type PlanRow = Selectable<LegacyPlansTable>;
/** A plan without its sealed note: what every view but a claim's opening reads. */
export type PlanMeta = Omit<PlanRow, 'note_sealed'>;
export type PartyRow = Selectable<LegacyPartiesTable>;
export type ObjectMeta = Omit<Selectable<LegacyObjectsTable>, 'content_sealed'>;

const PLAN_META = [
  'id', 'seq', 'account_id', 'name', 'status', 'checkin_interval_seconds', 'grace_seconds', 'quorum', 'deadline_at', 'warned_at', 'released_at',
  'cancelled_at', 'last_checkin_at', 'note_bytes', 'content_version', 'event_count', 'head_hash', 'created_at',
] as const;
const OBJECT_META = ['id', 'plan_id', 'version', 'position', 'name', 'content_type', 'byte_len', 'sha256', 'created_at', 'replaced_at'] as const;

export async function insertPlan(db: Kysely<DB>, row: Insertable<LegacyPlansTable>, parties: Insertable<LegacyPartiesTable>[], objects: Insertable<LegacyObjectsTable>[]): Promise<void> {
  await db.insertInto('legacy_plans').values(row).execute();
  if (parties.length) await db.insertInto('legacy_parties').values(parties).execute();
  if (objects.length) await db.insertInto('legacy_objects').values(objects).execute();
}

/** Plans of the account that are live (active or in warning): what the per-account limit counts. */
export async function liveCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db
    .selectFrom('legacy_plans')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('status', 'in', ['active', 'warning'])
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function listPlans(db: Kysely<DB>, accountId: string, limit: number): Promise<PlanMeta[]> {
  return db.selectFrom('legacy_plans').select(PLAN_META).where('account_id', '=', accountId).orderBy('seq', 'desc').limit(limit).execute();
}

/** One plan of the account (content-free), locked for the rest of `db`'s transaction with `lock`. */
export async function ownedPlan(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<PlanMeta | undefined> {
  let q = db.selectFrom('legacy_plans').select(PLAN_META).where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function planById(db: Kysely<DB>, id: string, lock = false): Promise<PlanMeta | undefined> {
  let q = db.selectFrom('legacy_plans').select(PLAN_META).where('id', '=', id);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function sealedNote(db: Kysely<DB>, id: string): Promise<Uint8Array | null> {
  return (await db.selectFrom('legacy_plans').select('note_sealed').where('id', '=', id).executeTakeFirst())?.note_sealed ?? null;
}

export async function partiesOf(db: Kysely<DB>, planIds: string[]): Promise<PartyRow[]> {
  if (planIds.length === 0) return [];
  return db.selectFrom('legacy_parties').selectAll().where('plan_id', 'in', planIds).orderBy('plan_id').orderBy('role').orderBy('position').execute();
}

/** The objects of the plan's current content, in order. */
export async function currentObjects(db: Kysely<DB>, planIds: string[]): Promise<ObjectMeta[]> {
  if (planIds.length === 0) return [];
  return db
    .selectFrom('legacy_objects as o')
    .innerJoin('legacy_plans as p', 'p.id', 'o.plan_id')
    .select(OBJECT_META.map((c) => `o.${c}` as const))
    .where('o.plan_id', 'in', planIds)
    .whereRef('o.version', '=', 'p.content_version')
    .orderBy('o.plan_id')
    .orderBy('o.position')
    .execute();
}

export async function objectContent(db: Kysely<DB>, planId: string, objectId: string): Promise<(ObjectMeta & { content_sealed: Uint8Array | null }) | undefined> {
  return db
    .selectFrom('legacy_objects as o')
    .innerJoin('legacy_plans as p', 'p.id', 'o.plan_id')
    .select([...OBJECT_META.map((c) => `o.${c}` as const), 'o.content_sealed'])
    .where('o.plan_id', '=', planId)
    .where('o.id', '=', objectId)
    .whereRef('o.version', '=', 'p.content_version')
    .executeTakeFirst();
}

export async function events(db: Kysely<DB>, planId: string) {
  return db.selectFrom('legacy_events').select(['seq', 'type', 'at', 'canonical', 'prev_hash', 'hash']).where('plan_id', '=', planId).orderBy('seq').execute();
}

/** Replaces the plan's content: earlier objects lose their ciphertext (their metadata stays), new ones go in. */
export async function replaceContent(db: Kysely<DB>, planId: string, version: number, note: Uint8Array, noteBytes: number, objects: Insertable<LegacyObjectsTable>[], at: Date): Promise<void> {
  await db.updateTable('legacy_objects').set({ content_sealed: null, replaced_at: at }).where('plan_id', '=', planId).where('replaced_at', 'is', null).execute();
  await db.updateTable('legacy_plans').set({ note_sealed: note, note_bytes: noteBytes, content_version: version }).where('id', '=', planId).execute();
  if (objects.length) await db.insertInto('legacy_objects').values(objects).execute();
}

/** Cancels: the note and every object's ciphertext nulled, every claim token killed; rows and events stay. */
export async function destroyContent(db: Kysely<DB>, planId: string, at: Date): Promise<void> {
  await db.updateTable('legacy_plans').set({ status: 'cancelled', cancelled_at: at, note_sealed: null }).where('id', '=', planId).execute();
  await db.updateTable('legacy_objects').set({ content_sealed: null }).where('plan_id', '=', planId).execute();
  await db.updateTable('legacy_parties').set({ claim_token_hash: null }).where('plan_id', '=', planId).execute();
}

/** The plan and beneficiary a live claim token belongs to (a killed or unknown token finds nothing). */
export async function byClaimToken(db: Kysely<DB>, tokenHash: string) {
  return db
    .selectFrom('legacy_parties as b')
    .innerJoin('legacy_plans as p', 'p.id', 'b.plan_id')
    .select(['p.name', 'p.status', 'b.wallet'])
    .where('b.claim_token_hash', '=', tokenHash)
    .where('b.role', '=', 'beneficiary')
    .where('p.status', '!=', 'cancelled')
    .executeTakeFirst();
}

/** Plans (other than cancelled) naming one of `wallets` in `role`, newest first, with that party's row. */
export async function plansNaming(db: Kysely<DB>, wallets: string[], role: 'beneficiary' | 'attester', statuses: PlanRow['status'][], limit: number) {
  if (wallets.length === 0) return [];
  return db
    .selectFrom('legacy_parties as x')
    .innerJoin('legacy_plans as p', 'p.id', 'x.plan_id')
    .select([...PLAN_META.map((c) => `p.${c}` as const), 'x.wallet', 'x.confirmed_at', 'x.claimed_at', 'x.position'])
    .where('x.wallet', 'in', wallets)
    .where('x.role', '=', role)
    .where('p.status', 'in', statuses)
    .orderBy('p.seq', 'desc')
    .orderBy('x.position')
    .limit(limit)
    .execute();
}

/** Counted confirmations per plan. */
export async function confirmations(db: Kysely<DB>, planIds: string[]): Promise<Map<string, number>> {
  if (planIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('legacy_parties')
    .select(['plan_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('plan_id', 'in', planIds)
    .where('role', '=', 'attester')
    .where('confirmed_at', 'is not', null)
    .groupBy('plan_id')
    .execute();
  return new Map(rows.map((r) => [r.plan_id, Number(r.n)]));
}

/** Ids of active plans whose deadline has passed, oldest deadline first. */
export async function dueForWarning(db: Kysely<DB>, now: Date, limit: number): Promise<string[]> {
  const rows = await db.selectFrom('legacy_plans').select('id').where('status', '=', 'active').where('deadline_at', '<=', now).orderBy('deadline_at').limit(limit).execute();
  return rows.map((r) => r.id);
}

/** Ids of plans in warning whose grace period (counted from the warning) has run and whose attester quorum, if any, is met. */
export async function dueForRelease(db: Kysely<DB>, now: Date, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('legacy_plans')
    .select('id')
    .where('status', '=', 'warning')
    .where(sql<boolean>`warned_at + grace_seconds * interval '1 second' <= ${now}`)
    .where(
      sql<boolean>`(quorum is null or quorum <= (select count(*) from legacy_parties a where a.plan_id = legacy_plans.id and a.role = 'attester' and a.confirmed_at is not null))`,
    )
    .orderBy('deadline_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}
