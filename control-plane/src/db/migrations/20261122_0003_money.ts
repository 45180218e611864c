import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Credit, holds, the append-only ledger, usage events, receipts and run chains. Holding and settling are
 * plpgsql functions so each is one round trip and one transaction, with row locks taken in one order
 * (run, then credit account, then keys) so concurrent requests never overspend and never deadlock.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table credit_accounts (
      account_id text primary key references accounts(id),
      balance_micro_usd bigint not null default 0,
      held_micro_usd bigint not null default 0 check (held_micro_usd >= 0),
      updated_at timestamptz not null
    );
    create table ledger_entries (
      id bigserial primary key,
      account_id text not null references accounts(id),
      amount_micro_usd bigint not null,
      kind text not null,
      ref text,
      balance_after_micro_usd bigint not null,
      created_at timestamptz not null
    );
    create index ledger_entries_account on ledger_entries (account_id, id);
    create unique index ledger_entries_ref on ledger_entries (kind, ref) where ref is not null and kind <> 'usage';
    create table holds (
      id text primary key,
      account_id text not null references accounts(id),
      key_chain text[] not null,
      amount_micro_usd bigint not null check (amount_micro_usd >= 0),
      status text not null,
      request_id text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      settled_cost_micro_usd bigint,
      closed_at timestamptz
    );
    create index holds_open on holds (expires_at) where status = 'held';
    create table usage_events (
      n bigserial unique,
      id text primary key,
      account_id text not null references accounts(id),
      key_id text,
      request_id text not null,
      kind text not null,
      route text not null,
      model text,
      units jsonb not null default '{}'::jsonb,
      cost_micro_usd bigint not null,
      run_id text,
      receipt_id text not null,
      created_at timestamptz not null
    );
    create index usage_events_account on usage_events (account_id, n);
    create index usage_events_account_time on usage_events (account_id, created_at);
    create table receipts (
      id text primary key,
      account_id text not null references accounts(id),
      usage_event_id text not null unique,
      kind text not null,
      payload text not null,
      hash text not null,
      signature text not null,
      run_id text,
      run_seq integer,
      prev_hash text,
      shared_at timestamptz,
      created_at timestamptz not null
    );
    create index receipts_account on receipts (account_id, created_at);
    create index receipts_run on receipts (account_id, run_id, run_seq) where run_id is not null;
    create table runs (
      account_id text not null references accounts(id),
      id text not null,
      head_hash text not null,
      receipt_count integer not null,
      total_cost_micro_usd bigint not null,
      first_at timestamptz not null,
      last_at timestamptz not null,
      primary key (account_id, id)
    );
    create index runs_recent on runs (account_id, last_at desc);
    alter table api_keys add column held_micro_usd bigint not null default 0;
    alter table api_keys add column window_start timestamptz;
    alter table api_keys add column window_spent_micro_usd bigint not null default 0;
  `);

  await sql`
    create function svc_hold(p_id text, p_account text, p_chain text[], p_amount bigint, p_enforce boolean,
        p_now timestamptz, p_expires timestamptz, p_request text, p_run text, p_window_s integer, p_limit bigint)
    returns table(outcome text, key_id text, balance bigint, held bigint, run_head text, run_count integer)
    language plpgsql as $fn$
    declare
      v_bal bigint; v_held bigint; k record; v_head text; v_count integer; v_projected bigint;
    begin
      insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
        values (p_account, 0, 0, p_now) on conflict (account_id) do nothing;
      select c.balance_micro_usd, c.held_micro_usd into v_bal, v_held from credit_accounts c where c.account_id = p_account for update;
      if p_limit > 0 then
        select a.id, a.window_start, a.window_spent_micro_usd, a.held_micro_usd into k from api_keys a where a.id = p_chain[1] for update;
        v_projected := k.held_micro_usd + p_amount +
          case when k.window_start is null or k.window_start <= p_now - make_interval(secs => p_window_s) then 0 else k.window_spent_micro_usd end;
        if v_projected > p_limit then
          update api_keys set frozen_at = p_now,
            frozen_reason = format('circuit breaker: spend would exceed %s micro-USD within %s s', p_limit, p_window_s)
            where id = p_chain[1] and frozen_at is null;
          perform pg_notify('svc_keys', p_chain[1]);
          return query select 'circuit_breaker_tripped'::text, p_chain[1], v_bal, v_held, null::text, null::integer;
          return;
        end if;
      end if;
      if p_enforce and v_bal - v_held < p_amount then
        return query select 'insufficient_credit'::text, null::text, v_bal, v_held, null::text, null::integer;
        return;
      end if;
      for k in select a.id, a.spend_cap_micro_usd, a.spent_micro_usd, a.held_micro_usd from api_keys a
               where a.id = any(p_chain) order by a.id for update loop
        if k.spend_cap_micro_usd is not null and k.spent_micro_usd + k.held_micro_usd + p_amount > k.spend_cap_micro_usd then
          return query select 'spend_cap_reached'::text, k.id, v_bal, v_held, null::text, null::integer;
          return;
        end if;
      end loop;
      update credit_accounts set held_micro_usd = held_micro_usd + p_amount, updated_at = p_now where account_id = p_account;
      update api_keys set held_micro_usd = held_micro_usd + p_amount where id = any(p_chain);
      insert into holds(id, account_id, key_chain, amount_micro_usd, status, request_id, created_at, expires_at)
        values (p_id, p_account, p_chain, p_amount, 'held', p_request, p_now, p_expires);
      if p_run is not null then
        select r.head_hash, r.receipt_count into v_head, v_count from runs r where r.account_id = p_account and r.id = p_run;
      end if;
      return query select 'held'::text, null::text, v_bal, v_held + p_amount, v_head, coalesce(v_count, 0);
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_close_hold(p_hold text, p_now timestamptz, p_status text) returns boolean
    language plpgsql as $fn$
    declare h record;
    begin
      select * into h from holds where id = p_hold for update;
      if not found or h.status <> 'held' then return false; end if;
      update credit_accounts set held_micro_usd = held_micro_usd - h.amount_micro_usd, updated_at = p_now where account_id = h.account_id;
      update api_keys set held_micro_usd = greatest(0, held_micro_usd - h.amount_micro_usd) where id = any(h.key_chain);
      update holds set status = p_status, closed_at = p_now where id = p_hold;
      return true;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_expire_holds(p_now timestamptz) returns integer
    language plpgsql as $fn$
    declare h record; n integer := 0;
    begin
      for h in select id from holds where status = 'held' and expires_at <= p_now order by expires_at limit 1000 loop
        if svc_close_hold(h.id, p_now, 'expired') then n := n + 1; end if;
      end loop;
      return n;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_credit(p_account text, p_amount bigint, p_kind text, p_ref text, p_now timestamptz)
    returns table(outcome text, balance bigint)
    language plpgsql as $fn$
    declare v_bal bigint;
    begin
      insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
        values (p_account, 0, 0, p_now) on conflict (account_id) do nothing;
      if p_ref is not null and exists(select 1 from ledger_entries where kind = p_kind and ref = p_ref) then
        return query select 'duplicate'::text, (select balance_micro_usd from credit_accounts where account_id = p_account);
        return;
      end if;
      update credit_accounts set balance_micro_usd = balance_micro_usd + p_amount, updated_at = p_now
        where account_id = p_account returning balance_micro_usd into v_bal;
      insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
        values (p_account, p_amount, p_kind, p_ref, v_bal, p_now);
      return query select 'credited'::text, v_bal;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_settle(p_hold text, p_now timestamptz, p_cost bigint, p_event text, p_kind text, p_route text,
        p_model text, p_units jsonb, p_receipt text, p_payload text, p_hash text, p_signature text,
        p_run text, p_prev text, p_seq integer, p_window_s integer)
    returns table(outcome text, balance bigint, run_head text, run_count integer)
    language plpgsql as $fn$
    declare h record; r record; v_release bigint; v_bal bigint;
    begin
      select * into h from holds where id = p_hold for update;
      if not found then return query select 'unknown_hold'::text, null::bigint, null::text, null::integer; return; end if;
      if h.status = 'settled' then return query select 'already_settled'::text, null::bigint, null::text, null::integer; return; end if;
      if p_run is not null then
        select * into r from runs where account_id = h.account_id and id = p_run for update;
        if (found and r.head_hash is distinct from p_prev) or (not found and p_prev is not null) then
          return query select 'run_moved'::text, null::bigint, r.head_hash, coalesce(r.receipt_count, 0);
          return;
        end if;
      end if;
      v_release := case when h.status = 'held' then h.amount_micro_usd else 0 end;
      update credit_accounts set balance_micro_usd = balance_micro_usd - p_cost, held_micro_usd = held_micro_usd - v_release,
          updated_at = p_now where account_id = h.account_id returning balance_micro_usd into v_bal;
      if p_cost <> 0 then
        insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
          values (h.account_id, -p_cost, 'usage', p_event, v_bal, p_now);
      end if;
      update api_keys set spent_micro_usd = spent_micro_usd + p_cost,
          held_micro_usd = greatest(0, held_micro_usd - v_release),
          window_spent_micro_usd = case when id <> h.key_chain[1] then window_spent_micro_usd
            when window_start is null or window_start <= p_now - make_interval(secs => p_window_s) then p_cost
            else window_spent_micro_usd + p_cost end,
          window_start = case when id <> h.key_chain[1] then window_start
            when window_start is null or window_start <= p_now - make_interval(secs => p_window_s) then p_now
            else window_start end
        where id = any(h.key_chain);
      insert into usage_events(id, account_id, key_id, request_id, kind, route, model, units, cost_micro_usd, run_id, receipt_id, created_at)
        values (p_event, h.account_id, h.key_chain[1], h.request_id, p_kind, p_route, p_model, p_units, p_cost, p_run, p_receipt, p_now);
      insert into receipts(id, account_id, usage_event_id, kind, payload, hash, signature, run_id, run_seq, prev_hash, created_at)
        values (p_receipt, h.account_id, p_event, p_kind, p_payload, p_hash, p_signature, p_run, p_seq, p_prev, p_now);
      if p_run is not null then
        insert into runs(account_id, id, head_hash, receipt_count, total_cost_micro_usd, first_at, last_at)
          values (h.account_id, p_run, p_hash, 1, p_cost, p_now, p_now)
          on conflict (account_id, id) do update set head_hash = p_hash, receipt_count = runs.receipt_count + 1,
            total_cost_micro_usd = runs.total_cost_micro_usd + p_cost, last_at = p_now;
      end if;
      update holds set status = 'settled', settled_cost_micro_usd = p_cost, closed_at = p_now where id = p_hold;
      perform pg_notify('svc_usage', json_build_object('account_id', h.account_id, 'id', p_event)::text);
      return query select 'settled'::text, v_bal, p_hash, p_seq;
    end $fn$;
  `.execute(db);
}
