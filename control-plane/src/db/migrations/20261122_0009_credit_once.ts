import { sql, type Kysely } from 'kysely';

/**
 * svc_credit under concurrency: two credits with the same (kind, ref) could both pass the "already
 * credited?" check, and the second then failed on the unique index with an error instead of answering
 * `duplicate` (callers caught 23505). The account's credit row is now locked first, so credits of one
 * account are decided one after the other, and a same-ref credit racing from another account (two accounts
 * claiming one transfer) answers `duplicate` from the unique index, with nothing written.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace function svc_credit(p_account text, p_amount bigint, p_kind text, p_ref text, p_now timestamptz)
    returns table(outcome text, balance bigint)
    language plpgsql as $fn$
    declare v_bal bigint;
    begin
      insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
        values (p_account, 0, 0, p_now) on conflict (account_id) do nothing;
      select balance_micro_usd into v_bal from credit_accounts where account_id = p_account for update;
      if p_ref is not null and exists(select 1 from ledger_entries where kind = p_kind and ref = p_ref) then
        return query select 'duplicate'::text, v_bal;
        return;
      end if;
      begin
        insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
          values (p_account, p_amount, p_kind, p_ref, v_bal + p_amount, p_now);
      exception when unique_violation then
        return query select 'duplicate'::text, v_bal;
        return;
      end;
      update credit_accounts set balance_micro_usd = balance_micro_usd + p_amount, updated_at = p_now
        where account_id = p_account returning balance_micro_usd into v_bal;
      return query select 'credited'::text, v_bal;
    end $fn$;
  `.execute(db);
}
