import { useEffect, useRef, useState } from 'preact/hooks';
import { api, data, raw, type Res } from '../api.ts';
import { localToIso, timeZone, usd, when } from '../format.ts';
import { Link } from '../router.tsx';
import { Field, useOutcome } from '../ui/actions.tsx';
import { ListOf, mapLoad, useLoad } from '../ui/load.tsx';
import { DataTable, saveBlob, useCursorPages } from '../ui/table.tsx';

type UsageEvent = Res<'/v1/usage/events', 'get'> extends infer R ? (R extends { events: Array<infer E> } ? E : never) : never;
interface Filters {
  key_id: string;
  model: string;
  route: string;
  kind: string;
  since: string;
  until: string;
}
const NONE: Filters = { key_id: '', model: '', route: '', kind: '', since: '', until: '' };
const PAGE = 25;

function query(f: Filters): Record<string, string> {
  const q: Record<string, string> = {};
  for (const k of ['key_id', 'model', 'route', 'kind'] as const) if (f[k].trim()) q[k] = f[k].trim();
  const since = localToIso(f.since);
  const until = localToIso(f.until);
  if (since) q.since = since;
  if (until) q.until = until;
  return q;
}

/** Usage events with filters and cursor paging, CSV export of the same filters, and a live tail. */
export function Usage() {
  const keys = useLoad(() => data(api.GET('/v1/keys')));
  const [draft, setDraft] = useState<Filters>(NONE);
  const [filters, setFilters] = useState<Filters>(NONE);
  const { cursor, reset, Pager } = useCursorPages();
  const page = useLoad(() => data(api.GET('/v1/usage/events', { params: { query: { ...query(filters), limit: PAGE, ...(cursor ? { cursor } : {}) } as never } })), [filters, cursor]);
  const events = mapLoad(page, (p) => (p as { events: UsageEvent[] }).events);
  const next = page.state === 'ready' ? (page.data as { next_cursor: string | null }).next_cursor : null;
  const out = useOutcome();
  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });

  const exportCsv = () =>
    out.run(async () => {
      const res = await raw(`/v1/usage/events?${new URLSearchParams({ ...query(filters), format: 'csv', limit: '1000' })}`);
      saveBlob(await res.blob(), 'usage-events.csv');
    }, 'Exported (up to 1000 events of these filters)');

  return (
    <section>
      <h1>Usage and receipts</h1>
      <form
        class="card"
        aria-label="Filter usage events"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters(draft);
          reset();
        }}
      >
        <div class="grid">
          <Field label="Key" id="f-key">
            <select id="f-key" value={draft.key_id} onChange={set('key_id')}>
              <option value="">Any key</option>
              {keys.state === 'ready' &&
                keys.data.map((k) => (
                  <option key={k.id} value={k.id}>
                    {k.name ?? k.prefix}
                  </option>
                ))}
            </select>
          </Field>
          <Field label="Model" id="f-model">
            <input id="f-model" value={draft.model} onInput={set('model')} />
          </Field>
          <Field label="Route" id="f-route">
            <input id="f-route" value={draft.route} onInput={set('route')} placeholder="POST /v1/chat/completions" />
          </Field>
          <Field label="Kind" id="f-kind">
            <input id="f-kind" value={draft.kind} onInput={set('kind')} />
          </Field>
          <Field label={`From (${timeZone})`} id="f-since">
            <input id="f-since" type="datetime-local" value={draft.since} onInput={set('since')} />
          </Field>
          <Field label={`Until (${timeZone})`} id="f-until">
            <input id="f-until" type="datetime-local" value={draft.until} onInput={set('until')} />
          </Field>
        </div>
        <div class="actions">
          <button type="submit" class="primary">
            Apply filters
          </button>
          <button type="button" onClick={() => void exportCsv()}>
            Export CSV
          </button>
        </div>
        {out.view}
      </form>
      <ListOf load={events} what="usage events" empty="No usage events match these filters.">
        {(list) => <EventTable events={list} name="events" />}
      </ListOf>
      <Pager next={next} />
      <LiveTail />
    </section>
  );
}

export function EventTable(props: { events: UsageEvent[]; name: string }) {
  return (
    <DataTable name={props.name} columns={['When', 'Kind', 'Model', 'Route', 'Key', 'Cost', 'Receipt']} times>
          {props.events.map((e) => (
            <tr key={e.id} data-event={e.id} data-cost={e.cost_micro_usd}>
              <td>{when(e.created_at)}</td>
              <td>{e.kind}</td>
              <td>{e.model ?? '-'}</td>
              <td>{e.route}</td>
              <td>{e.key_id ?? '-'}</td>
              <td>{usd(e.cost_micro_usd)}</td>
              <td>
                <Link href={`/receipts/${encodeURIComponent(e.receipt_id)}`}>Open</Link>
              </td>
            </tr>
          ))}
        </DataTable>
  );
}

/** New metering events as they happen, from the SSE feed /v1/usage/stream. */
function LiveTail() {
  const [on, setOn] = useState(false);
  const [events, setEvents] = useState<UsageEvent[]>([]);
  const [state, setState] = useState('');
  const stop = useRef<AbortController | null>(null);
  useEffect(() => {
    if (!on) return;
    const ac = new AbortController();
    stop.current = ac;
    setState('Connecting…');
    void (async () => {
      try {
        const res = await raw('/v1/usage/stream', { signal: ac.signal, headers: { accept: 'text/event-stream' } });
        setState('Live: new events appear here');
        const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const line = frame.split('\n').find((l) => l.startsWith('data:'));
            if (frame.includes('event: usage') && line) {
              const ev = JSON.parse(line.slice(5)) as UsageEvent;
              setEvents((xs) => [ev, ...xs].slice(0, 50));
            }
          }
        }
        setState('The feed ended');
      } catch (e) {
        if (!ac.signal.aborted) setState(`The feed stopped: ${(e as Error).message}`);
      }
    })();
    return () => ac.abort();
  }, [on]);
  return (
    <>
      <h2>Live tail</h2>
      <button type="button" aria-pressed={on} onClick={() => setOn(!on)}>
        {on ? 'Stop the live tail' : 'Start the live tail'}
      </button>
      <p class="muted" role="status">
        {state}
      </p>
      {on && events.length > 0 && <EventTable events={events} name="live" />}
    </>
  );
}
