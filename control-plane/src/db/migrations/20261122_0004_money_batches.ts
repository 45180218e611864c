import { sql, type Kysely } from 'kysely';

/**
 * Batched hold and settle: one round trip and one commit for every request that arrived while the previous
 * batch was in flight. Items run in account order (so concurrent batches lock rows in one global order and
 * cannot deadlock), each inside its own exception block so one bad item never fails its neighbours.
 * Holds commit without waiting for the WAL flush: a hold lost to a database crash only makes its request
 * fail at settle, and nothing is charged; settlements (the money) always wait for durability.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function svc_hold_many(p_items jsonb, p_enforce boolean, p_now timestamptz, p_expires timestamptz, p_window_s integer, p_limit bigint)
    returns jsonb language plpgsql as $fn$
    declare it jsonb; r record; v_out jsonb := '[]'::jsonb;
    begin
      perform set_config('synchronous_commit', 'off', true);
      for it in select value from jsonb_array_elements(p_items) order by value->>'account', value->>'id' loop
        begin
          select * into r from svc_hold(it->>'id', it->>'account', array(select jsonb_array_elements_text(it->'chain')),
            (it->>'amount')::bigint, p_enforce, p_now, p_expires, it->>'request', it->>'run', p_window_s, p_limit);
          v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', r.outcome, 'key_id', r.key_id,
            'balance', r.balance, 'held', r.held, 'run_head', r.run_head, 'run_count', r.run_count));
        exception when others then
          v_out := v_out || jsonb_build_array(jsonb_build_object('id', it->>'id', 'outcome', 'error', 'error', sqlerrm));
        end;
      end loop;
      return v_out;
    end $fn$;
  `.execute(db);

  await sql`
    create function svc_settle_many(p_items jsonb, p_now timestamptz, p_window_s integer)
    returns jsonb language plpgsql as $fn$
    declare it jsonb; r record; v_out jsonb := '[]'::jsonb;
    begin
      for it in select value from jsonb_array_elements(p_items) order by value->>'account', value->>'hold' loop
        begin
          select * into r from svc_settle(it->>'hold', p_now, (it->>'cost')::bigint, it->>'event', it->>'kind', it->>'route',
            it->>'model', it->'units', it->>'receipt', it->>'payload', it->>'hash', it->>'signature',
            it->>'run', it->>'prev', (it->>'seq')::integer, p_window_s);
          v_out := v_out || jsonb_build_array(jsonb_build_object('hold', it->>'hold', 'outcome', r.outcome, 'balance', r.balance,
            'run_head', r.run_head, 'run_count', r.run_count));
        exception when others then
          v_out := v_out || jsonb_build_array(jsonb_build_object('hold', it->>'hold', 'outcome', 'error', 'error', sqlerrm));
        end;
      end loop;
      return v_out;
    end $fn$;
  `.execute(db);
}
