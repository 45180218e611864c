import { sql, type Kysely } from 'kysely';

/**
 * A run's span from its receipts. The settle recorded a run's first_at and last_at at its own time (p_now),
 * which comes after each receipt is signed (by the signing and the batch: a millisecond or more, and a whole
 * retry when the chain moved), so a run proof's span matched no receipt and no verifier could recompute it.
 * svc_settle now takes them from the signed created_at of the run's first and newest receipts, and the runs
 * recorded so far are set from their receipts the same way. Nothing else of the settle changes.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace function svc_settle(it jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql as $fn$
    declare
      v_account text := it->>'account'; v_cost bigint := (it->>'cost')::bigint; v_run text := it->>'run';
      v_chain text[] := array(select jsonb_array_elements_text(it->'chain'));
      v_release bigint := 0; v_bal bigint; r record; v_hold_account text; v_signed_at timestamptz;
    begin
      if v_run is not null then
        -- Serialise settlements of one run, including its very first receipt when there is no row to lock yet.
        perform pg_advisory_xact_lock(hashtextextended(v_account || '/' || v_run, 0));
        select head_hash, receipt_count into r from runs where account_id = v_account and id = v_run for update;
        if (found and r.head_hash is distinct from it->>'prev') or (not found and it->>'prev' is not null) then
          return jsonb_build_object('outcome', 'run_moved', 'run_head', r.head_hash, 'run_count', coalesce(r.receipt_count, 0));
        end if;
      end if;
      delete from holds where id = it->>'hold' returning amount_micro_usd, account_id into v_release, v_hold_account;
      if v_hold_account is not null and v_hold_account <> v_account then
        raise exception 'hold % belongs to another account', it->>'hold';
      end if;
      v_release := coalesce(v_release, 0); -- an expired hold was already released; the work is still charged
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
        -- The run's span is its receipts' signed times (the first receipt's created_at, the newest's), so
        -- anyone recomputes it from the receipts; the settle's own time is later, by the signing and the batch.
        v_signed_at := ((it->>'payload')::jsonb->>'created_at')::timestamptz;
        insert into runs(account_id, id, head_hash, receipt_count, total_cost_micro_usd, first_at, last_at)
          values (v_account, v_run, it->>'hash', 1, v_cost, v_signed_at, v_signed_at)
          on conflict (account_id, id) do update set head_hash = excluded.head_hash, receipt_count = runs.receipt_count + 1,
            total_cost_micro_usd = runs.total_cost_micro_usd + excluded.total_cost_micro_usd, last_at = excluded.last_at;
      end if;
      return jsonb_build_object('outcome', 'settled', 'balance', v_bal);
    end $fn$;
  `.execute(db);
  await sql`
    update runs r set first_at = (f.payload::jsonb->>'created_at')::timestamptz, last_at = (l.payload::jsonb->>'created_at')::timestamptz
    from (select account_id, run_id, min(run_seq) as lo, max(run_seq) as hi from receipts where run_id is not null group by account_id, run_id) e
    join receipts f on f.account_id = e.account_id and f.run_id = e.run_id and f.run_seq = e.lo
    join receipts l on l.account_id = e.account_id and l.run_id = e.run_id and l.run_seq = e.hi
    where r.account_id = e.account_id and r.id = e.run_id
  `.execute(db);
}
