import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Subscriptions (subscriptions module): one row per account that ever left Free (no row: Free). The
 * monthly fee is taken from prepaid credit by `svc_debit`, a conditional debit through the ledger: in one
 * statement it refuses when the spendable credit (balance - held) cannot cover the amount, and a `ref`
 * makes it idempotent per kind (the ledger's unique (kind, ref) index backs that up).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table subscriptions (
      account_id text primary key references accounts(id),
      plan_id text not null,
      period_start timestamptz not null,
      period_end timestamptz,
      auto_renew boolean not null,
      scheduled_plan_id text,
      fee_micro_usd bigint not null default 0,
      created_at timestamptz not null,
      updated_at timestamptz not null
    );
    create index subscriptions_due on subscriptions (period_end) where period_end is not null;
  `);

  await sql`
    create function svc_debit(p_account text, p_amount bigint, p_kind text, p_ref text, p_now timestamptz, p_enforce boolean)
    returns table(outcome text, balance bigint, held bigint)
    language plpgsql as $fn$
    declare v_bal bigint; v_held bigint;
    begin
      if p_amount < 0 then raise exception 'debit amount must not be negative'; end if;
      insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
        values (p_account, 0, 0, p_now) on conflict (account_id) do nothing;
      select balance_micro_usd, held_micro_usd into v_bal, v_held from credit_accounts where account_id = p_account for update;
      if p_ref is not null and exists(select 1 from ledger_entries where kind = p_kind and ref = p_ref) then
        return query select 'duplicate'::text, v_bal, v_held;
        return;
      end if;
      if p_enforce and v_bal - v_held < p_amount then
        return query select 'insufficient_credit'::text, v_bal, v_held;
        return;
      end if;
      update credit_accounts set balance_micro_usd = balance_micro_usd - p_amount, updated_at = p_now
        where account_id = p_account returning balance_micro_usd into v_bal;
      if p_amount <> 0 then
        insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
          values (p_account, -p_amount, p_kind, p_ref, v_bal, p_now);
      end if;
      return query select 'debited'::text, v_bal, v_held;
    end $fn$;
  `.execute(db);
}
