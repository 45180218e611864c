import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { JudgeVerdictsTable } from '../../db/schema-quality.ts';

export type VerdictRow = Selectable<JudgeVerdictsTable>;
/** A row without its sealed columns: what lists, reads and unpublishing return. */
export type VerdictMeta = Omit<VerdictRow, 'question_sealed' | 'rationales_sealed'>;

const META = [
  'id',
  'seq',
  'account_id',
  'key_id',
  'state',
  'models',
  'options',
  'evidence_root',
  'question_sha256',
  'outcome',
  'receipt_id',
  'receipt_payload',
  'receipt_hash',
  'receipt_signature',
  'created_at',
  'published_at',
  'unpublished_at',
] as const;

export async function insertVerdict(db: Kysely<DB>, row: Insertable<JudgeVerdictsTable>): Promise<VerdictMeta> {
  return db.insertInto('judge_verdicts').values(row).returning(META).executeTakeFirstOrThrow();
}

/** The account's verdicts, newest first. */
/** Signed verdicts of every account, and how many are published (the explorer's totals). */
export async function verdictCounts(db: Kysely<DB>): Promise<{ all: number; published: number }> {
  const r = await db
    .selectFrom('judge_verdicts')
    .select((eb) => [eb.fn.countAll<number>().as('all'), eb.fn.count<number>('published_at').as('published')])
    .executeTakeFirstOrThrow();
  return { all: Number(r.all), published: Number(r.published) };
}

export async function listVerdicts(db: Kysely<DB>, accountId: string, limit: number): Promise<VerdictMeta[]> {
  return db.selectFrom('judge_verdicts').select(META).where('account_id', '=', accountId).orderBy('seq', 'desc').limit(limit).execute();
}

/** One verdict of the account, content-free; another account's is not found either. */
export async function ownedVerdict(db: Kysely<DB>, accountId: string, id: string): Promise<VerdictMeta | undefined> {
  return db.selectFrom('judge_verdicts').select(META).where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** A published verdict with its sealed content; undefined for any other (unknown, unpublished: the same). */
export async function publishedVerdict(db: Kysely<DB>, id: string): Promise<VerdictRow | undefined> {
  return db.selectFrom('judge_verdicts').selectAll().where('id', '=', id).where('state', '=', 'published').executeTakeFirst();
}

/** Publishes a verdict of the account with its sealed question and rationales, in one statement. */
export async function markPublished(db: Kysely<DB>, accountId: string, id: string, sealed: { question: Uint8Array; rationales: Uint8Array }, at: Date): Promise<VerdictRow | undefined> {
  return db
    .updateTable('judge_verdicts')
    .set({ state: 'published', question_sealed: sealed.question, rationales_sealed: sealed.rationales, published_at: at, unpublished_at: null })
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirst();
}

/** Unpublishes a verdict of the account: the state and the destruction of its sealed content in one statement; idempotent. */
export async function markUnpublished(db: Kysely<DB>, accountId: string, id: string, at: Date): Promise<VerdictMeta | undefined> {
  return db
    .updateTable('judge_verdicts')
    .set((eb) => ({
      state: 'unpublished' as const,
      question_sealed: null,
      rationales_sealed: null,
      unpublished_at: eb.case().when('state', '=', 'published').then(eb.val(at)).else(eb.ref('unpublished_at')).end(),
    }))
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returning(META)
    .executeTakeFirst();
}
