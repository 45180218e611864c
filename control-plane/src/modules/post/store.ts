import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB, PostMessagesTable } from '../../db/schema.ts';

export type MessageRow = Selectable<PostMessagesTable>;

/** Spec document 3, Limits: a thread lists at most 500 messages, oldest first. */
export const THREAD_CAP = 500;

export async function insertMessage(db: Kysely<DB>, row: Insertable<PostMessagesTable>): Promise<void> {
  await db.insertInto('post_messages').values(row).execute();
}

export async function messageById(db: Kysely<DB>, id: string): Promise<MessageRow | undefined> {
  return db.selectFrom('post_messages').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Unread, undeleted messages in an account's inbox. */
export async function unreadCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db
    .selectFrom('post_messages')
    .select(sql<number>`count(*)::bigint`.as('n'))
    .where('recipient_account_id', '=', accountId)
    .where('read_at', 'is', null)
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** A page of a box, newest first, below `beforeSeq` when given; one more than `limit` to tell whether more follow. */
export async function boxPage(db: Kysely<DB>, box: 'inbox' | 'outbox', accountId: string, limit: number, beforeSeq: number | null): Promise<MessageRow[]> {
  let q = db
    .selectFrom('post_messages')
    .selectAll()
    .where(box === 'inbox' ? 'recipient_account_id' : 'sender_account_id', '=', accountId);
  if (beforeSeq !== null) q = q.where('seq', '<', beforeSeq);
  return q.orderBy('seq', 'desc').limit(limit + 1).execute();
}

/** The messages of a thread the account is party to (sender or recipient), oldest first, at most THREAD_CAP. */
export async function threadOf(db: Kysely<DB>, threadId: string, accountId: string): Promise<MessageRow[]> {
  return db
    .selectFrom('post_messages')
    .selectAll()
    .where('thread_id', '=', threadId)
    .where((eb) => eb.or([eb('sender_account_id', '=', accountId), eb('recipient_account_id', '=', accountId)]))
    .orderBy('seq', 'asc')
    .limit(THREAD_CAP)
    .execute();
}

export async function markRead(db: Kysely<DB>, id: string, at: Date): Promise<void> {
  await db.updateTable('post_messages').set({ read_at: at }).where('id', '=', id).where('read_at', 'is', null).execute();
}

/** Destroys a message's content in the statement that marks it deleted; the content-free row stays. */
export async function destroyContent(db: Kysely<DB>, id: string, at: Date): Promise<void> {
  await db.updateTable('post_messages').set({ subject_sealed: null, body_sealed: null, deleted_at: at }).where('id', '=', id).where('deleted_at', 'is', null).execute();
}
