import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Credit leases (the money path's throughput target). A gateway process may hold a lease: a slice of an account's
 * credit, and of every limit on the key chain, set aside for it (a `holds` row with `lease` set, counted in
 * `leased_micro_usd` on the account and on each key of the chain). The process admits that chain's requests
 * from the lease in memory, with no round trip, and each settle uses the request's cost out of the lease in
 * the same transaction that writes the ledger, the usage event and the receipt. So nothing can be spent
 * twice: a lease is credit taken from the spendable balance by one conditional update, exactly like a hold.
 *
 * svc_hold_many grants a lease when a hold asks for one: the request itself plus up to a quarter of the room
 * left under every limit (spendable credit when billing is enforced, each capped key, the breaker), and only
 * when that is at least four requests' worth. A process tops a lease up before it runs out, with an item
 * that holds nothing when no lease can be granted and never trips the breaker (outcome `no_lease`). Small balances and tight caps therefore never lease, and every hold there is decided in the
 * database as before. A hold refused only because credit is leased to processes notifies `svc_leases` so
 * they give back what they have not reserved. The breaker counts spend and holds but not leases: another
 * process's lease must not freeze a key. Leases expire like holds (the process renews the ones it uses).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table holds add column lease boolean not null default false;
    alter table credit_accounts add column leased_micro_usd bigint not null default 0;
    alter table api_keys add column leased_micro_usd bigint not null default 0;
    drop function svc_hold_many(jsonb, boolean, timestamptz, timestamptz, integer, bigint);
  `);
  await sql`
    create or replace function svc_hold_many(p_items jsonb, p_enforce boolean, p_now timestamptz, p_expires timestamptz, p_window_s integer, p_limit bigint, p_lease_expires timestamptz)
    returns jsonb language plpgsql set plan_cache_mode = force_generic_plan as $fn$
    declare
      itm record; it jsonb; v_out jsonb := '[]'::jsonb; v_rows jsonb := '[]'::jsonb; v_leases jsonb := '[]'::jsonb;
      acc jsonb; keys jsonb; v_acct_delta jsonb := '{}'::jsonb; v_key_delta jsonb := '{}'::jsonb;
      v_acct_ldelta jsonb := '{}'::jsonb; v_key_ldelta jsonb := '{}'::jsonb;
      v_account text; v_amount bigint; v_chain text[]; v_bal bigint; v_held bigint; v_leased bigint; v_key jsonb; v_id text;
      v_outcome text; v_key_id text; v_keys boolean; v_head text; v_count integer; v_missing bigint;
      v_lease jsonb; v_only boolean; v_gone boolean; v_room bigint; v_extra bigint; v_grant bigint; v_recall boolean;
    begin
      perform set_config('synchronous_commit', 'off', true);
      -- Lock and load the batch's credit rows; an account without one yet (its first hold) gets it created here.
      with want as (select distinct value->>'account' as id from jsonb_array_elements(p_items)),
      locked as (select account_id, balance_micro_usd, held_micro_usd, leased_micro_usd from credit_accounts
        where account_id in (select id from want) order by account_id for update)
      select coalesce((select jsonb_object_agg(account_id, jsonb_build_array(balance_micro_usd, held_micro_usd, leased_micro_usd)) from locked), '{}'::jsonb),
             (select count(*) from want) - (select count(*) from locked)
        into acc, v_missing;
      if v_missing > 0 then
        insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
          select distinct value->>'account', 0, 0, p_now from jsonb_array_elements(p_items) on conflict (account_id) do nothing;
        select coalesce(jsonb_object_agg(account_id, jsonb_build_array(balance_micro_usd, held_micro_usd, leased_micro_usd)), '{}'::jsonb) into acc from (
          select account_id, balance_micro_usd, held_micro_usd, leased_micro_usd from credit_accounts
          where account_id in (select value->>'account' from jsonb_array_elements(p_items)) order by account_id for update) a;
      end if;
      select coalesce(jsonb_object_agg(id, jsonb_build_array(spend_cap_micro_usd, spent_micro_usd, held_micro_usd,
               case when window_start is null or window_start <= p_now - make_interval(secs => p_window_s) then 0 else window_spent_micro_usd end,
               case when revoked_at is not null or (expires_at is not null and expires_at <= p_now) then 'invalid'
                    when frozen_at is not null then 'frozen' end,
               rotated_to is not null, leased_micro_usd)), '{}'::jsonb)
        into keys from (
        select id, spend_cap_micro_usd, spent_micro_usd, held_micro_usd, window_start, window_spent_micro_usd, revoked_at, expires_at, frozen_at, rotated_to, leased_micro_usd from api_keys
        where id in (select jsonb_array_elements_text(value->'chain') from jsonb_array_elements(p_items)) order by id for update) k;

      for itm in select value as it, array(select jsonb_array_elements_text(value->'chain')) as chain,
                      array(select x from jsonb_array_elements_text(value->'chain') x order by x) as sorted
               from jsonb_array_elements(p_items) order by value->>'account', value->>'id' loop
        it := itm.it; v_chain := itm.chain;
        v_account := it->>'account'; v_amount := (it->>'amount')::bigint;
        v_outcome := 'held'; v_key_id := null; v_keys := p_limit > 0; v_recall := false;
        v_lease := it->'lease'; v_gone := false;

        -- Topping up a lease this process holds: it may have expired and been released meanwhile.
        if v_lease is not null and not (v_lease->>'fresh')::boolean then
          perform 1 from holds where id = v_lease->>'id' and lease and account_id = v_account for update;
          v_gone := not found;
        end if;
        v_only := v_lease is not null and coalesce((v_lease->>'only')::boolean, false);

        v_bal := (acc->v_account->>0)::bigint; v_held := (acc->v_account->>1)::bigint; v_leased := (acc->v_account->>2)::bigint;
        -- The key itself, under its row lock: a freeze or revocation counts at once, whatever an auth cache still holds.
        case keys->v_chain[1]->>4
          when 'frozen' then v_outcome := 'circuit_breaker_tripped'; v_key_id := v_chain[1];
          when 'invalid' then v_outcome := 'key_invalid'; v_key_id := v_chain[1];
          else null;
        end case;
        foreach v_id in array itm.sorted loop
          exit when v_outcome <> 'held';
          v_key := keys->v_id;
          if v_key is null then continue; end if;
          if (v_key->>5)::boolean then v_outcome := 'key_stale'; v_key_id := v_id; exit; end if;
          -- The breaker counts spend and holds, not leases (credit set aside, not spent): another process's
          -- lease never freezes a key. A lease is only granted inside the limit, so it overshoots by no more.
          if v_id = v_chain[1] and p_limit > 0 and (v_key->>2)::bigint + v_amount + (v_key->>3)::bigint > p_limit then
            -- A top-up no request is waiting for never freezes a key: the next request decides.
            if v_only then v_outcome := 'no_lease'; exit; end if;
            update api_keys set frozen_at = p_now,
              frozen_reason = format('circuit breaker: spend would exceed %s micro-USD within %s s', p_limit, p_window_s)
              where id = v_id and frozen_at is null;
            perform pg_notify('svc_keys', v_id);
            v_outcome := 'circuit_breaker_tripped'; v_key_id := v_id; exit;
          end if;
          if v_key->>0 is not null then
            v_keys := true;
            if (v_key->>1)::bigint + (v_key->>2)::bigint + (v_key->>6)::bigint + v_amount > (v_key->>0)::bigint then
              v_outcome := 'spend_cap_reached'; v_key_id := v_id;
              v_recall := (v_key->>6)::bigint > 0 and (v_key->>1)::bigint + (v_key->>2)::bigint + v_amount <= (v_key->>0)::bigint;
              exit;
            end if;
          end if;
        end loop;
        if v_outcome = 'held' and p_enforce and v_bal - v_held - v_leased < v_amount then
          v_outcome := 'insufficient_credit';
          v_recall := v_leased > 0 and v_bal - v_held >= v_amount;
        end if;
        if v_outcome <> 'held' and v_only then v_outcome := 'no_lease'; v_recall := false; end if;
        if v_outcome <> 'held' then
          -- Refused only because processes have credit leased: they are asked to give back what they have not reserved.
          if v_recall then perform pg_notify('svc_leases', v_account); end if;
          v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', v_outcome, 'key_id', v_key_id, 'balance', v_bal,
            'held', v_held, 'leased', v_leased, 'recall', v_recall));
          continue;
        end if;

        -- A lease: this request plus up to a quarter of the room left under every limit (credit when enforced,
        -- each capped key, the breaker), and at least three more of this request, or no lease at all.
        v_grant := 0;
        if v_lease is not null and not v_gone and v_amount > 0 then
          v_room := case when p_enforce then v_bal - v_held - v_leased - v_amount else 9223372036854775807 end;
          foreach v_id in array v_chain loop
            v_key := keys->v_id;
            if v_key is null then continue; end if;
            if v_key->>0 is not null then
              v_room := least(v_room, (v_key->>0)::bigint - (v_key->>1)::bigint - (v_key->>2)::bigint - (v_key->>6)::bigint - v_amount);
            end if;
            if v_id = v_chain[1] and p_limit > 0 then
              v_room := least(v_room, p_limit - (v_key->>2)::bigint - (v_key->>3)::bigint - (v_key->>6)::bigint - v_amount);
            end if;
          end loop;
          v_extra := least(greatest(0, (v_lease->>'want')::bigint - v_amount), v_room / 4);
          if v_extra >= 3 * v_amount then v_grant := v_amount + v_extra; end if;
        end if;

        if v_grant > 0 then
          acc := jsonb_set(acc, array[v_account, '2'], to_jsonb(v_leased + v_grant));
          v_acct_ldelta := jsonb_set(v_acct_ldelta, array[v_account], to_jsonb(coalesce((v_acct_ldelta->>v_account)::bigint, 0) + v_grant));
          -- Leases are counted on every key of the chain (held only where a limit applies), so the cap
          -- checks of any process see them whatever changes later.
          foreach v_id in array v_chain loop
            if keys ? v_id then
              keys := jsonb_set(keys, array[v_id, '6'], to_jsonb((keys->v_id->>6)::bigint + v_grant));
              v_key_ldelta := jsonb_set(v_key_ldelta, array[v_id], to_jsonb(coalesce((v_key_ldelta->>v_id)::bigint, 0) + v_grant));
            end if;
          end loop;
          v_leases := v_leases || jsonb_build_array(jsonb_build_object('id', v_lease->>'id', 'account', v_account, 'chain', it->'chain',
            'delta', v_grant, 'request', it->>'request', 'fresh', (v_lease->>'fresh')::boolean));
          v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', 'held', 'balance', v_bal, 'held', v_held,
            'lease', v_grant, 'run_head', null, 'run_count', 0));
          continue;
        end if;
        if v_only then
          v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', 'no_lease', 'lease_gone', v_gone));
          continue;
        end if;

        acc := jsonb_set(acc, array[v_account, '1'], to_jsonb(v_held + v_amount));
        v_acct_delta := jsonb_set(v_acct_delta, array[v_account], to_jsonb(coalesce((v_acct_delta->>v_account)::bigint, 0) + v_amount));
        if v_keys then
          foreach v_id in array v_chain loop
            if keys ? v_id then
              keys := jsonb_set(keys, array[v_id, '2'], to_jsonb((keys->v_id->>2)::bigint + v_amount));
              v_key_delta := jsonb_set(v_key_delta, array[v_id], to_jsonb(coalesce((v_key_delta->>v_id)::bigint, 0) + v_amount));
            end if;
          end loop;
        end if;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object('id', it->>'id', 'account', v_account, 'chain', it->'chain', 'amount', v_amount, 'request', it->>'request'));
        v_head := null; v_count := null;
        if it->>'run' is not null then
          select head_hash, receipt_count into v_head, v_count from runs where account_id = v_account and id = it->>'run';
        end if;
        v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', 'held', 'balance', v_bal, 'held', v_held + v_amount,
          'run_head', v_head, 'run_count', coalesce(v_count, 0), 'lease', 0, 'lease_gone', v_gone));
      end loop;

      if jsonb_array_length(v_rows) > 0 or jsonb_array_length(v_leases) > 0 then
        -- One statement for the writes (rows already locked above, so their order cannot deadlock).
        with a as (
          update credit_accounts a set held_micro_usd = a.held_micro_usd + coalesce((v_acct_delta->>a.account_id)::bigint, 0),
              leased_micro_usd = a.leased_micro_usd + coalesce((v_acct_ldelta->>a.account_id)::bigint, 0), updated_at = p_now
            where a.account_id in (select jsonb_object_keys(v_acct_delta) union select jsonb_object_keys(v_acct_ldelta))
        ), k as (
          update api_keys k set held_micro_usd = k.held_micro_usd + coalesce((v_key_delta->>k.id)::bigint, 0),
              leased_micro_usd = greatest(0, k.leased_micro_usd + coalesce((v_key_ldelta->>k.id)::bigint, 0))
            where k.id in (select jsonb_object_keys(v_key_delta) union select jsonb_object_keys(v_key_ldelta))
        ), l as (
          insert into holds(id, account_id, key_chain, amount_micro_usd, request_id, created_at, expires_at, lease)
            select r.value->>'id', r.value->>'account', array(select jsonb_array_elements_text(r.value->'chain')), (r.value->>'delta')::bigint,
                   r.value->>'request', p_now, p_lease_expires, true
            from jsonb_array_elements(v_leases) r where (r.value->>'fresh')::boolean
        ), lr as (
          update holds h set amount_micro_usd = h.amount_micro_usd + (r.value->>'delta')::bigint, expires_at = greatest(h.expires_at, p_lease_expires)
            from jsonb_array_elements(v_leases) r where h.id = r.value->>'id' and not (r.value->>'fresh')::boolean
        )
        insert into holds(id, account_id, key_chain, amount_micro_usd, request_id, created_at, expires_at)
          select r.value->>'id', r.value->>'account', array(select jsonb_array_elements_text(r.value->'chain')), (r.value->>'amount')::bigint,
                 r.value->>'request', p_now, p_expires
          from jsonb_array_elements(v_rows) r;
      end if;
      return v_out;
    end $fn$;
  `.execute(db);
  await sql`
    create or replace function svc_settle_many(p_items jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql set plan_cache_mode = force_generic_plan as $fn$
    declare it jsonb; v_res jsonb; v_out jsonb := '[]'::jsonb; v_events jsonb := '[]'::jsonb; v_set jsonb; v_chunk jsonb;
      v_runs boolean; v_plain boolean;
    begin
      select coalesce(bool_or(value->>'run' is not null), false), coalesce(bool_or(value->>'run' is null), false)
        into v_runs, v_plain from jsonb_array_elements(p_items);
      -- Run chain items, one by one.
      if v_runs then
        for it in select value from jsonb_array_elements(p_items) where value->>'run' is not null
                  order by value->>'account', value->>'hold' loop
          v_res := svc_settle(it, p_now, p_window_s);
          v_out := v_out || jsonb_build_array(v_res || jsonb_build_object('hold', it->>'hold'));
          if v_res->>'outcome' = 'settled' then
            v_events := v_events || jsonb_build_array(jsonb_build_array(it->>'account', it->>'event'));
          end if;
        end loop;
      end if;

      if not v_plain then
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
               x.kind, x.route, x.model, o.v->'units' as units, x.payload, x.hash, x.signature, coalesce(x.lease, false) as lease
        from jsonb_array_elements(p_items) with ordinality o(v, ord),
             jsonb_to_record(o.v) as x(hold text, account text, receipt text, cost bigint, event text, kind text, route text,
                                      model text, payload text, hash text, signature text, lease boolean)
        where o.v->>'run' is null
      ), closed as (
        -- An expired hold was already released (nothing to release now); the work is still charged.
        delete from holds h using items i where h.id = i.hold and not i.lease returning h.id, h.amount_micro_usd
      ), lease_use as (
        -- A request admitted from a lease uses its cost out of the lease (the rest of its reservation stays
        -- with the lease's process); the account and keys are locked above, so the lease rows are stable here.
        select u.hold, least(h.amount_micro_usd, u.cost) as release
        from (select hold, sum(cost) as cost from items where lease group by hold) u join holds h on h.id = u.hold and h.lease
      ), lease_rows as (
        update holds h set amount_micro_usd = h.amount_micro_usd - u.release from lease_use u where h.id = u.hold
      ), item as (
        select i.*, coalesce(c.amount_micro_usd, 0) as release,
               case when i.lease and row_number() over (partition by i.hold order by i.ord) = 1 then coalesce(u.release, 0) else 0 end as lrelease
        from items i left join closed c on c.id = i.hold left join lease_use u on i.lease and u.hold = i.hold
      ), per_account as (
        select account, sum(cost) as cost, sum(release) as release, sum(lrelease) as lrelease from item group by account
      ), balances as (
        update credit_accounts a set balance_micro_usd = a.balance_micro_usd - p.cost, held_micro_usd = a.held_micro_usd - p.release,
            leased_micro_usd = a.leased_micro_usd - p.lrelease, updated_at = p_now
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
        select k.id, sum(i.cost) as cost, sum(i.release) as release, sum(i.lrelease) as lrelease, sum(i.cost) filter (where i.chain[1] = k.id) as leaf_cost
        from item i cross join lateral unnest(i.chain) as k(id) group by k.id
      ), keys as (
        -- Every key of a chain pays the cost and drops the hold; the leaf key's breaker window moves.
        update api_keys a set spent_micro_usd = a.spent_micro_usd + p.cost,
            held_micro_usd = greatest(0, a.held_micro_usd - p.release), leased_micro_usd = greatest(0, a.leased_micro_usd - p.lrelease),
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
      -- NOTIFY payloads stay under 8000 bytes: 60 events each (a batch of up to 60 needs no splitting).
      if jsonb_array_length(v_events) <= 60 then
        perform pg_notify('svc_usage', v_events::text);
      else
        for v_chunk in select jsonb_agg(e order by n) from jsonb_array_elements(v_events) with ordinality t(e, n) group by (n - 1) / 60 loop
          perform pg_notify('svc_usage', v_chunk::text);
        end loop;
      end if;
      return v_out;
    end $fn$;
  `.execute(db);
  await sql`
    create or replace function svc_release_hold(p_hold text, p_now timestamptz) returns boolean
    language plpgsql as $fn$
    declare h record;
    begin
      delete from holds where id = p_hold returning * into h;
      if not found then return false; end if;
      if h.lease then
        update credit_accounts set leased_micro_usd = leased_micro_usd - h.amount_micro_usd, updated_at = p_now where account_id = h.account_id;
        update api_keys set leased_micro_usd = greatest(0, leased_micro_usd - h.amount_micro_usd) where id = any(h.key_chain) and leased_micro_usd > 0;
      else
        update credit_accounts set held_micro_usd = held_micro_usd - h.amount_micro_usd, updated_at = p_now where account_id = h.account_id;
        update api_keys set held_micro_usd = greatest(0, held_micro_usd - h.amount_micro_usd) where id = any(h.key_chain) and held_micro_usd > 0;
      end if;
      return true;
    end $fn$;
  `.execute(db);
  await sql`
    create function svc_lease_return(p_items jsonb, p_now timestamptz) returns integer
    language plpgsql as $fn$
    declare it jsonb; h record; v_amt bigint; n integer := 0;
    begin
      -- Lock order as everywhere: the accounts first (by id), then the lease rows and keys.
      perform 1 from credit_accounts where account_id in (
        select account_id from holds where lease and id in (select value->>'id' from jsonb_array_elements(p_items))) order by account_id for update;
      for it in select value from jsonb_array_elements(p_items) order by value->>'id' loop
        select * into h from holds where id = it->>'id' and lease for update;
        if not found then continue; end if;
        if (it->>'close')::boolean then
          v_amt := h.amount_micro_usd;
          delete from holds where id = h.id;
        else
          v_amt := least(h.amount_micro_usd, greatest(0, (it->>'ret')::bigint));
          update holds set amount_micro_usd = amount_micro_usd - v_amt where id = h.id;
        end if;
        update credit_accounts set leased_micro_usd = leased_micro_usd - v_amt, updated_at = p_now where account_id = h.account_id;
        update api_keys set leased_micro_usd = greatest(0, leased_micro_usd - v_amt) where id = any(h.key_chain) and leased_micro_usd > 0;
        n := n + 1;
      end loop;
      return n;
    end $fn$;
  `.execute(db);
  await sql`
    create function svc_lease_renew(p_ids text[], p_expires timestamptz) returns text[]
    language sql as $fn$
      with r as (update holds set expires_at = greatest(expires_at, p_expires) where lease and id = any(p_ids) returning id)
      select coalesce(array_agg(id), '{}') from r
    $fn$;
  `.execute(db);
  await sql`
    create or replace function svc_debit(p_account text, p_amount bigint, p_kind text, p_ref text, p_now timestamptz, p_enforce boolean)
    returns table(outcome text, balance bigint, held bigint)
    language plpgsql as $fn$
    declare v_bal bigint; v_held bigint; v_leased bigint;
    begin
      if p_amount < 0 then raise exception 'debit amount must not be negative'; end if;
      insert into credit_accounts(account_id, balance_micro_usd, held_micro_usd, updated_at)
        values (p_account, 0, 0, p_now) on conflict (account_id) do nothing;
      select balance_micro_usd, held_micro_usd, leased_micro_usd into v_bal, v_held, v_leased from credit_accounts where account_id = p_account for update;
      if p_ref is not null and exists(select 1 from ledger_entries where kind = p_kind and ref = p_ref) then
        return query select 'duplicate'::text, v_bal, v_held;
        return;
      end if;
      -- Leased credit is set aside for requests being admitted, so a debit cannot take it. Refused only
      -- for that: 'leased', and processes are asked to give back what they have not reserved.
      if p_enforce and v_bal - v_held - v_leased < p_amount then
        if v_leased > 0 and v_bal - v_held >= p_amount then
          perform pg_notify('svc_leases', p_account);
          return query select 'leased'::text, v_bal, v_held + v_leased;
          return;
        end if;
        return query select 'insufficient_credit'::text, v_bal, v_held + v_leased;
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
