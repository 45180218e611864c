import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * A leaner money path, measured with bench/money.ts. The holds table keeps only open holds (settling,
 * releasing or expiring a hold deletes its row), so no status updates and no partial-index churn; one
 * locking pass over the key chain checks caps and the breaker together; batches take no per-item
 * savepoint (a failed batch is retried item by item by the caller); one NOTIFY per batch.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    delete from holds where status <> 'held';
    alter table holds drop column status;
    alter table holds drop column settled_cost_micro_usd;
    alter table holds drop column closed_at;
    drop index if exists holds_open;
    create index holds_expiry on holds (expires_at);
    alter table usage_events drop constraint usage_events_n_key;
    drop index if exists usage_events_account_time;
    drop function svc_hold_many(jsonb, boolean, timestamptz, timestamptz, integer, bigint);
    drop function svc_settle_many(jsonb, timestamptz, integer);
    drop function svc_expire_holds(timestamptz);
    drop function svc_close_hold(text, timestamptz, text);
    drop function svc_hold(text, text, text[], bigint, boolean, timestamptz, timestamptz, text, text, integer, bigint);
    drop function svc_settle(text, timestamptz, bigint, text, text, text, text, jsonb, text, text, text, text, text, text, integer, integer);
  `);

  await sql`
    create function svc_hold(it jsonb, p_enforce boolean, p_now timestamptz, p_expires timestamptz, p_window_s integer, p_limit bigint)
    returns jsonb language plpgsql as $fn$
    declare
      v_account text := it->>'account'; v_amount bigint := (it->>'amount')::bigint;
      v_chain text[] := array(select jsonb_array_elements_text(it->'chain'));
      v_bal bigint; v_held bigint; k record; v_head text; v_count integer; v_keys boolean := p_limit > 0;
    begin
      select balance_micro_usd, held_micro_usd into v_bal, v_held from credit_accounts where account_id = v_account for update;
      if not found then
        insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at) values (v_account, 0, 0, p_now)
          on conflict (account_id) do nothing;
        select balance_micro_usd, held_micro_usd into v_bal, v_held from credit_accounts where account_id = v_account for update;
      end if;
      for k in select id, spend_cap_micro_usd, spent_micro_usd, held_micro_usd, window_start, window_spent_micro_usd
               from api_keys where id = any(v_chain) order by id for update loop
        if (k.id = v_chain[1] and p_limit > 0 and k.held_micro_usd + v_amount +
            (case when k.window_start is null or k.window_start <= p_now - make_interval(secs => p_window_s) then 0 else k.window_spent_micro_usd end) > p_limit) then
          update api_keys set frozen_at = p_now,
            frozen_reason = format('circuit breaker: spend would exceed %s micro-USD within %s s', p_limit, p_window_s)
            where id = k.id and frozen_at is null;
          perform pg_notify('svc_keys', k.id);
          return jsonb_build_object('outcome', 'circuit_breaker_tripped', 'key_id', k.id, 'balance', v_bal, 'held', v_held);
        end if;
        if k.spend_cap_micro_usd is not null then
          v_keys := true;
          if k.spent_micro_usd + k.held_micro_usd + v_amount > k.spend_cap_micro_usd then
            return jsonb_build_object('outcome', 'spend_cap_reached', 'key_id', k.id, 'balance', v_bal, 'held', v_held);
          end if;
        end if;
      end loop;
      if p_enforce and v_bal - v_held < v_amount then
        return jsonb_build_object('outcome', 'insufficient_credit', 'balance', v_bal, 'held', v_held);
      end if;
      update credit_accounts set held_micro_usd = held_micro_usd + v_amount, updated_at = p_now where account_id = v_account;
      if v_keys then update api_keys set held_micro_usd = held_micro_usd + v_amount where id = any(v_chain); end if;
      insert into holds(id, account_id, key_chain, amount_micro_usd, request_id, created_at, expires_at)
        values (it->>'id', v_account, v_chain, v_amount, it->>'request', p_now, p_expires);
      if it->>'run' is not null then
        select head_hash, receipt_count into v_head, v_count from runs where account_id = v_account and id = it->>'run';
      end if;
      return jsonb_build_object('outcome', 'held', 'balance', v_bal, 'held', v_held + v_amount, 'run_head', v_head, 'run_count', coalesce(v_count, 0));
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_settle(it jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql as $fn$
    declare
      v_account text := it->>'account'; v_cost bigint := (it->>'cost')::bigint; v_run text := it->>'run';
      v_chain text[] := array(select jsonb_array_elements_text(it->'chain'));
      v_release bigint := 0; v_bal bigint; r record;
    begin
      if v_run is not null then
        select head_hash, receipt_count into r from runs where account_id = v_account and id = v_run for update;
        if (found and r.head_hash is distinct from it->>'prev') or (not found and it->>'prev' is not null) then
          return jsonb_build_object('outcome', 'run_moved', 'run_head', r.head_hash, 'run_count', coalesce(r.receipt_count, 0));
        end if;
      end if;
      delete from holds where id = it->>'hold' returning amount_micro_usd into v_release;
      v_release := coalesce(v_release, 0);
      update credit_accounts set balance_micro_usd = balance_micro_usd - v_cost, held_micro_usd = held_micro_usd - v_release,
          updated_at = p_now where account_id = v_account returning balance_micro_usd into v_bal;
      if v_cost <> 0 then
        insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
          values (v_account, -v_cost, 'usage', it->>'event', v_bal, p_now);
      end if;
      update api_keys set spent_micro_usd = spent_micro_usd + v_cost,
          held_micro_usd = greatest(0, held_micro_usd - v_release),
          window_spent_micro_usd = case when id <> v_chain[1] then window_spent_micro_usd
            when window_start is null or window_start <= p_now - make_interval(secs => p_window_s) then v_cost
            else window_spent_micro_usd + v_cost end,
          window_start = case when id <> v_chain[1] then window_start
            when window_start is null or window_start <= p_now - make_interval(secs => p_window_s) then p_now
            else window_start end
        where id = any(v_chain);
      insert into usage_events(id, account_id, key_id, request_id, kind, route, model, units, cost_micro_usd, run_id, receipt_id, created_at)
        values (it->>'event', v_account, v_chain[1], it->>'receipt', it->>'kind', it->>'route', it->>'model', it->'units', v_cost, v_run, it->>'receipt', p_now);
      insert into receipts(id, account_id, usage_event_id, kind, payload, hash, signature, run_id, run_seq, prev_hash, created_at)
        values (it->>'receipt', v_account, it->>'event', it->>'kind', it->>'payload', it->>'hash', it->>'signature', v_run,
          (it->>'seq')::integer, it->>'prev', p_now);
      if v_run is not null then
        insert into runs(account_id, id, head_hash, receipt_count, total_cost_micro_usd, first_at, last_at)
          values (v_account, v_run, it->>'hash', 1, v_cost, p_now, p_now)
          on conflict (account_id, id) do update set head_hash = excluded.head_hash, receipt_count = runs.receipt_count + 1,
            total_cost_micro_usd = runs.total_cost_micro_usd + excluded.total_cost_micro_usd, last_at = p_now;
      end if;
      return jsonb_build_object('outcome', 'settled', 'balance', v_bal);
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_hold_many(p_items jsonb, p_enforce boolean, p_now timestamptz, p_expires timestamptz, p_window_s integer, p_limit bigint)
    returns jsonb language plpgsql as $fn$
    declare it jsonb; v_out jsonb := '[]'::jsonb;
    begin
      perform set_config('synchronous_commit', 'off', true);
      for it in select value from jsonb_array_elements(p_items) order by value->>'account', value->>'id' loop
        v_out := v_out || jsonb_build_array(svc_hold(it, p_enforce, p_now, p_expires, p_window_s, p_limit) || jsonb_build_object('id', it->>'id'));
      end loop;
      return v_out;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_settle_many(p_items jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql as $fn$
    declare it jsonb; v_res jsonb; v_out jsonb := '[]'::jsonb; v_events jsonb := '[]'::jsonb;
    begin
      for it in select value from jsonb_array_elements(p_items) order by value->>'account', value->>'hold' loop
        v_res := svc_settle(it, p_now, p_window_s);
        v_out := v_out || jsonb_build_array(v_res || jsonb_build_object('hold', it->>'hold'));
        if v_res->>'outcome' = 'settled' then
          v_events := v_events || jsonb_build_array(jsonb_build_array(it->>'account', it->>'event'));
          if jsonb_array_length(v_events) >= 60 then -- NOTIFY payloads stay under 8000 bytes
            perform pg_notify('svc_usage', v_events::text);
            v_events := '[]'::jsonb;
          end if;
        end if;
      end loop;
      if jsonb_array_length(v_events) > 0 then
        perform pg_notify('svc_usage', v_events::text);
      end if;
      return v_out;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_release_hold(p_hold text, p_now timestamptz) returns boolean
    language plpgsql as $fn$
    declare h record;
    begin
      delete from holds where id = p_hold returning * into h;
      if not found then return false; end if;
      update credit_accounts set held_micro_usd = held_micro_usd - h.amount_micro_usd, updated_at = p_now where account_id = h.account_id;
      update api_keys set held_micro_usd = greatest(0, held_micro_usd - h.amount_micro_usd) where id = any(h.key_chain) and held_micro_usd > 0;
      return true;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_expire_holds(p_now timestamptz) returns integer
    language plpgsql as $fn$
    declare h record; n integer := 0;
    begin
      for h in select id from holds where expires_at <= p_now order by expires_at limit 1000 loop
        if svc_release_hold(h.id, p_now) then n := n + 1; end if;
      end loop;
      return n;
    end $fn$;
  `.execute(db);
}
