import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Pending settles: a settle answered before its ledger entry, usage event and receipt row are written (an
 * inference call admitted from a credit lease) is first made durable here, where every replica can reach it.
 * A row holds the whole settle item (the signed receipt, the usage event, the cost, the lease it is charged
 * from) as svc_settle_many takes it, and which process wrote it. It leaves in the transaction that settles
 * it, whoever runs that transaction: its own process (the usual flush), a replica reading the account
 * (read-your-writes), or the leader's sweep once the owner is gone. A row is deleted before it is settled, in
 * one transaction, so it can be settled only once; the receipt's primary key is the second guard.
 *
 * The hot path writes a group commit's rows with one multi-row insert: on a Postgres server on a connection
 * of its own with synchronous_commit off, like every hold (a row survives any gateway process dying the moment
 * it commits; only a crash of the server itself can lose its last fraction of a second); on the embedded
 * database, which runs inside the gateway process, through svc_pending_add, whose commit waits for its WAL
 * write (p_local_wal).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table money_pending_settles (
      receipt_id text primary key,
      -- The order the settles were answered in (a group commit's rows in their order): they are stored in it,
      -- so usage events are numbered as their calls were answered.
      seq bigint generated always as identity,
      account_id text not null,
      owner text not null,
      item text not null,
      created_at timestamptz not null
    );
    create index money_pending_settles_account on money_pending_settles (account_id);
    create index money_pending_settles_owner on money_pending_settles (owner, created_at);
  `);
  await sql`
    create function svc_pending_add(p_ids text[], p_accounts text[], p_items text[], p_owner text, p_now timestamptz, p_local_wal boolean)
    returns integer language plpgsql as $fn$
    declare n integer;
    begin
      -- The embedded database's WAL buffers are in the gateway process itself: there a commit waits for its write.
      if not p_local_wal then perform set_config('synchronous_commit', 'off', true); end if;
      insert into money_pending_settles(receipt_id, account_id, owner, item, created_at)
        select i, a, p_owner, t, p_now from unnest(p_ids, p_accounts, p_items) with ordinality as u(i, a, t, o) order by o;
      get diagnostics n = row_count;
      return n;
    end $fn$;
  `.execute(db);
  // Takes pending rows (by receipt id, else by account, else by owner, else older than p_before) and settles them in the same
  // transaction. Without p_wait, rows another transaction is settling are skipped (it settles them); with it
  // (a read of the account), they are waited for. Answers the receipt ids taken, those settled now (a receipt
  // stored already is not settled again) and svc_settle_many's answer for those, in that order.
  await sql`
    create function svc_pending_settle(p_ids text[], p_account text, p_owner text, p_before timestamptz, p_wait boolean,
      p_limit integer, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql as $fn$
    declare v_ids text[]; v_items jsonb; v_settled jsonb; v_out jsonb := '[]'::jsonb;
    begin
      -- One statement per way of picking, each on its own index (a generic plan of one statement with every
      -- condition optional would scan the table).
      if p_ids is not null then
        select array_agg(receipt_id) into v_ids from (
          select receipt_id from money_pending_settles where receipt_id = any(p_ids)
          order by seq for update skip locked) s;
      elsif p_account is not null and p_wait then
        select array_agg(receipt_id) into v_ids from (
          select receipt_id from money_pending_settles where account_id = p_account
          order by seq limit p_limit for update) s;
      elsif p_account is not null then
        select array_agg(receipt_id) into v_ids from (
          select receipt_id from money_pending_settles where account_id = p_account
          order by seq limit p_limit for update skip locked) s;
      elsif p_owner is not null then
        select array_agg(receipt_id) into v_ids from (
          select receipt_id from money_pending_settles where owner = p_owner
          order by seq limit p_limit for update skip locked) s;
      else
        select array_agg(receipt_id) into v_ids from (
          select receipt_id from money_pending_settles where created_at < p_before
          order by seq limit p_limit for update skip locked) s;
      end if;
      if v_ids is null then
        return jsonb_build_object('ids', '[]'::jsonb, 'settled', '[]'::jsonb, 'out', '[]'::jsonb);
      end if;
      with taken as (
        delete from money_pending_settles where receipt_id = any(v_ids) returning receipt_id, item, seq
      ), todo as (
        -- A settle whose receipt is stored already committed (its process settled it before answering after all): not again.
        select t.receipt_id, t.item, t.seq from taken t where not exists (select 1 from receipts r where r.id = t.receipt_id)
      )
      select coalesce(jsonb_agg(receipt_id order by seq), '[]'::jsonb), ('[' || string_agg(item, ',' order by seq) || ']')::jsonb
        into v_settled, v_items from todo;
      if jsonb_array_length(v_settled) > 0 then
        v_out := svc_settle_many(v_items, p_now, p_window_s);
      end if;
      return jsonb_build_object('ids', to_jsonb(v_ids), 'settled', v_settled, 'out', v_out);
    end $fn$;
  `.execute(db);
}
