import { useState } from 'preact/hooks';
import { api, data } from '../api.ts';
import { parseUsd, usd, when } from '../format.ts';
import { Link } from '../router.tsx';
import { useOutcome } from '../ui/actions.tsx';
import { BarList, DailyChart } from '../ui/chart.tsx';
import { ListOf, Loaded, mapLoad, useLoad } from '../ui/load.tsx';
import { DataTable } from '../ui/table.tsx';

const reads = {
  balance: () => data(api.GET('/v1/billing/balance')),
  usage: () => data(api.GET('/v1/usage')),
  keys: () => data(api.GET('/v1/keys')),
  alerts: () => data(api.GET('/v1/billing/alerts')),
};
type Reads = typeof reads;
let early: { [K in keyof Reads]?: ReturnType<Reads[K]> } = {};

/**
 * The overview's reads, started as the console boots on the overview (beside its sign-in check, not after it):
 * the first render takes them; any later one reads afresh.
 */
export function prefetchOverview(): void {
  early = { balance: reads.balance(), usage: reads.usage(), keys: reads.keys(), alerts: reads.alerts() };
  for (const p of Object.values(early)) p.catch(() => undefined); // not signed in: the overview is not shown
}
/** Not signed in after all: what was read early answered 401, and the overview after a sign-in reads afresh. */
export function dropPrefetch(): void {
  early = {};
}
function read<K extends keyof Reads>(k: K): ReturnType<Reads[K]> {
  const p = early[k];
  delete early[k];
  return (p ?? reads[k]()) as ReturnType<Reads[K]>;
}

/** Credit, spend per day, per model and per key (the API's 14 days), the latest calls and the alert threshold. */
export function Overview() {
  const balance = useLoad(() => read('balance'));
  const usage = useLoad(() => read('usage'));
  const keys = useLoad(() => read('keys'));
  const names = new Map(keys.state === 'ready' ? keys.data.map((k) => [k.id, k.name ?? k.prefix]) : []);
  const latest = mapLoad(usage, (u) => u.events);
  return (
    <section>
      <h1>Overview</h1>
      <Loaded load={balance} what="your credit">
        {(b) => (
          <dl class="figures-row" data-figures="balance">
            <div>
              <dt>Balance</dt>
              <dd data-figure="balance">{usd(b.balance_micro_usd)}</dd>
            </div>
            <div>
              <dt>Held</dt>
              <dd data-figure="held">{usd(b.held_micro_usd)}</dd>
            </div>
            <div>
              <dt>Spendable</dt>
              <dd data-figure="spendable">{usd(b.spendable_micro_usd)}</dd>
            </div>
          </dl>
        )}
      </Loaded>
      <Loaded load={usage} what="your usage">
        {(u) => (
          <>
            <p class="muted" data-figure="lifetime">
              Lifetime: {u.totals.events} calls, {usd(u.totals.cost_micro_usd)}
            </p>
            <div class="charts">
              <DailyChart days={u.daily} label="Spend per day, last 14 days (UTC days)" />
              <BarList label="Spend per model, last 14 days" kind="model" rows={u.by_model.map((m) => ({ name: m.model ?? '(no model)', events: m.events, cost_micro_usd: m.cost_micro_usd }))} />
              <BarList label="Spend per key, last 14 days" kind="key" rows={u.by_key.map((k) => ({ name: k.key_id ? (names.get(k.key_id) ?? k.key_id) : '(no key)', events: k.events, cost_micro_usd: k.cost_micro_usd }))} />
            </div>
          </>
        )}
      </Loaded>
      <h2>Latest calls</h2>
      <ListOf load={latest} what="the latest calls" empty="No calls yet: create a key, then call the API with it.">
        {(events) => (
          <DataTable name="latest" columns={['When', 'What', 'Cost', 'Receipt']} times>
                {events.map((e) => (
                  <tr key={e.id} data-event={e.id} data-cost={e.cost_micro_usd}>
                    <td>{when(e.created_at)}</td>
                    <td>
                      {e.model ?? e.kind} <span class="muted">{e.route}</span>
                    </td>
                    <td>{usd(e.cost_micro_usd)}</td>
                    <td>
                      <Link href={`/receipts/${encodeURIComponent(e.receipt_id)}`}>Verify</Link>
                    </td>
                  </tr>
                ))}
              </DataTable>
        )}
      </ListOf>
      <AlertThreshold />
    </section>
  );
}

function AlertThreshold() {
  const alert = useLoad(() => read('alerts'));
  const [text, setText] = useState('');
  const out = useOutcome();
  const save = (value: number | null) =>
    out.run(async () => {
      await api.PUT('/v1/billing/alerts', { body: { balance_low_micro_usd: value } });
      alert.reload();
    }, 'Saved');
  return (
    <>
      <h2>Low-balance alert</h2>
      <Loaded load={alert} what="the alert threshold">
        {(a) => (
          <>
            <p data-figure="threshold">
              A <code>balance_low</code> webhook fires when the balance falls below <strong>{usd(a.effective_micro_usd)}</strong>
              {a.balance_low_micro_usd === null ? ' (the deployment default)' : ''}.
            </p>
            <form
              class="inline"
              onSubmit={(e) => {
                e.preventDefault();
                const v = parseUsd(text);
                if (v === null) return out.say('Type an amount in dollars, e.g. 5 or 0.25', true);
                void save(v);
              }}
            >
              <label for="threshold">New threshold (USD)</label>
              <input id="threshold" inputMode="decimal" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
              <button type="submit">Set</button>
              <button type="button" onClick={() => void save(null)}>
                Use the default
              </button>
            </form>
            {out.view}
          </>
        )}
      </Loaded>
    </>
  );
}
