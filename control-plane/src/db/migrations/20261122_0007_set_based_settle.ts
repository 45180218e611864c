import { sql, type Kysely } from 'kysely';

/**
 * Settling a batch set-based. Until now svc_settle_many looped over its items and ran about eight
 * statements per item; under load a batch holds 8-60 items, so the per-statement overhead of plpgsql was
 * most of the database's time on the money path (bench/money.ts). Items without a run are now settled by
 * one statement per table for the whole batch: the locks on accounts and keys are taken first, in id order
 * (as svc_hold takes them), then holds are closed, balances, keys, ledger, usage events and receipts are
 * written, each in one pass. An item's `balance_after` is the account's balance after that item, in batch
 * order, exactly as the item-by-item path computed it. Items that extend a run keep the item-by-item path,
 * which checks and advances the run's hash chain under its advisory lock. Plans are generic (see 0008).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace function svc_settle_many(p_items jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql set plan_cache_mode = force_generic_plan as $fn$
    declare it jsonb; v_res jsonb; v_out jsonb := '[]'::jsonb; v_events jsonb := '[]'::jsonb; v_set jsonb; v_chunk jsonb;
    begin
      -- Run chain items, one by one.
      for it in select value from jsonb_array_elements(p_items) where value->>'run' is not null
                order by value->>'account', value->>'hold' loop
        v_res := svc_settle(it, p_now, p_window_s);
        v_out := v_out || jsonb_build_array(v_res || jsonb_build_object('hold', it->>'hold'));
        if v_res->>'outcome' = 'settled' then
          v_events := v_events || jsonb_build_array(jsonb_build_array(it->>'account', it->>'event'));
        end if;
      end loop;

      if not exists (select 1 from jsonb_array_elements(p_items) where value->>'run' is null) then
        if jsonb_array_length(v_events) > 0 then perform pg_notify('svc_usage', v_events::text); end if;
        return v_out;
      end if;

      -- Lock order: accounts, then keys, each by id (svc_hold takes them in the same order).
      perform 1 from credit_accounts where account_id in (select value->>'account' from jsonb_array_elements(p_items) where value->>'run' is null)
        order by account_id for update;
      perform 1 from api_keys where id in (select jsonb_array_elements_text(value->'chain') from jsonb_array_elements(p_items) where value->>'run' is null)
        order by id for update;
      if exists (select 1 from holds h join jsonb_array_elements(p_items) j on h.id = j.value->>'hold'
                 where j.value->>'run' is null and h.account_id <> j.value->>'account') then
        raise exception 'a hold of this batch belongs to another account';
      end if;

      with items as (
        select o.ord, x.hold, x.account, x.receipt, array(select jsonb_array_elements_text(o.v->'chain')) as chain, x.cost, x.event,
               x.kind, x.route, x.model, o.v->'units' as units, x.payload, x.hash, x.signature
        from jsonb_array_elements(p_items) with ordinality o(v, ord),
             jsonb_to_record(o.v) as x(hold text, account text, receipt text, cost bigint, event text, kind text, route text,
                                      model text, payload text, hash text, signature text)
        where o.v->>'run' is null
      ), closed as (
        -- An expired hold was already released (nothing to release now); the work is still charged.
        delete from holds h using items i where h.id = i.hold returning h.id, h.amount_micro_usd
      ), item as (
        select i.*, coalesce(c.amount_micro_usd, 0) as release from items i left join closed c on c.id = i.hold
      ), per_account as (
        select account, sum(cost) as cost, sum(release) as release from item group by account
      ), balances as (
        update credit_accounts a set balance_micro_usd = a.balance_micro_usd - p.cost, held_micro_usd = a.held_micro_usd - p.release,
            updated_at = p_now
          from per_account p where a.account_id = p.account
          returning a.account_id, a.balance_micro_usd
      ), after as (
        -- Each item's balance after it, in batch order: the final balance plus the costs of the items after it.
        select i.*, b.balance_micro_usd + sum(i.cost) over (partition by i.account) - sum(i.cost) over (partition by i.account order by i.ord) as balance_after
        from item i join balances b on b.account_id = i.account
      ), ledger as (
        insert into ledger_entries(account_id, amount_micro_usd, kind, ref, balance_after_micro_usd, created_at)
          select account, -cost, 'usage', event, balance_after, p_now from after where cost <> 0 order by ord
      ), per_key as (
        select k.id, sum(i.cost) as cost, sum(i.release) as release, sum(i.cost) filter (where i.chain[1] = k.id) as leaf_cost
        from item i cross join lateral unnest(i.chain) as k(id) group by k.id
      ), keys as (
        -- Every key of a chain pays the cost and drops the hold; the leaf key's breaker window moves.
        update api_keys a set spent_micro_usd = a.spent_micro_usd + p.cost,
            held_micro_usd = greatest(0, a.held_micro_usd - p.release),
            window_spent_micro_usd = case when p.leaf_cost is null then a.window_spent_micro_usd
              when a.window_start is null or a.window_start <= p_now - make_interval(secs => p_window_s) then p.leaf_cost
              else a.window_spent_micro_usd + p.leaf_cost end,
            window_start = case when p.leaf_cost is null then a.window_start
              when a.window_start is null or a.window_start <= p_now - make_interval(secs => p_window_s) then p_now
              else a.window_start end
          from per_key p where a.id = p.id
      ), events as (
        insert into usage_events(id, account_id, key_id, request_id, kind, route, model, units, cost_micro_usd, run_id, receipt_id, created_at)
          select event, account, chain[1], receipt, kind, route, model, units, cost, null, receipt, p_now from items order by ord
      ), receipts as (
        insert into receipts(id, account_id, usage_event_id, kind, payload, hash, signature, run_id, run_seq, prev_hash, created_at)
          select receipt, account, event, kind, payload, hash, signature, null, null, null, p_now from items order by ord
      )
      select jsonb_agg(jsonb_build_object('hold', hold, 'outcome', 'settled', 'balance', balance_after) order by ord),
             jsonb_agg(jsonb_build_array(account, event) order by ord)
        into v_set, v_chunk from after;

      v_out := v_out || v_set;
      v_events := v_events || v_chunk;
      -- NOTIFY payloads stay under 8000 bytes: 60 events each.
      for v_chunk in select jsonb_agg(e order by n) from jsonb_array_elements(v_events) with ordinality t(e, n) group by (n - 1) / 60 loop
        perform pg_notify('svc_usage', v_chunk::text);
      end loop;
      return v_out;
    end $fn$;
  `.execute(db);
}
