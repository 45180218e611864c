import { useState } from 'preact/hooks';
import { api, data } from '../api.ts';
import { usd, when } from '../format.ts';
import { ConfirmButton, Field, useOutcome, TextField } from '../ui/actions.tsx';
import { ListOf, Loaded, mapLoad, useLoad } from '../ui/load.tsx';
import { PaymentRequests } from './payment-requests.tsx';
import { DataTable, useCursorPages } from '../ui/table.tsx';

/** How to deposit and the deposits, the ledger, plans and the subscription, payment requests. */
export function Billing() {
  return (
    <section>
      <h1>Billing</h1>
      <Deposits />
      <Ledger />
      <Plans />
      <PaymentRequests />
    </section>
  );
}

function Deposits() {
  const methods = useLoad(() => data(api.GET('/v1/billing/methods')));
  const deposits = useLoad(() => data(api.GET('/v1/billing/deposits')));
  const [chain, setChain] = useState('');
  const [tx, setTx] = useState('');
  const out = useOutcome();
  return (
    <>
      <h2>Deposit</h2>
      <Loaded load={methods} what="how to pay">
        {(m) =>
          m.treasury ? (
            <>
              <p>
                Send USDT to the treasury <code data-figure="treasury">{m.treasury}</code> on one of these chains, then submit the transaction here.
                {m.deposit_senders === 'linked' ? ' Only transfers sent from a wallet linked to this account are credited.' : ''}
              </p>
              <DataTable name="chains" columns={['Chain', 'Token contract', 'Confirmations', 'Minimum']}>
                    {m.chains.map((c) => (
                      <tr key={c.network}>
                        <td>
                          {c.name} <span class="muted">({c.network})</span>
                        </td>
                        <td>
                          <code>{c.usdt}</code>
                        </td>
                        <td>{c.confirmations}</td>
                        <td>{usd(c.min_deposit_micro_usd)}</td>
                      </tr>
                    ))}
                  </DataTable>
              <form
                class="inline"
                aria-label="Submit a deposit"
                onSubmit={(e) => {
                  e.preventDefault();
                  void out.run(async () => {
                    await api.POST('/v1/billing/deposits', { body: { chain: chain || m.chains[0]?.network || '', tx_hash: tx.trim() } });
                    deposits.reload();
                  }, 'Submitted');
                }}
              >
                <Field label="Chain" id="d-chain">
                  <select id="d-chain" value={chain} onChange={(e) => setChain((e.target as HTMLSelectElement).value)}>
                    {m.chains.map((c) => (
                      <option key={c.network} value={c.network}>
                        {c.name}
                      </option>
                    ))}
                  </select>
                </Field>
                <TextField label="Transaction hash" id="d-tx" value={tx} set={setTx} required />
                <button type="submit">Submit deposit</button>
              </form>
            </>
          ) : (
            <p class="muted">Deposits are not configured on this gateway.</p>
          )
        }
      </Loaded>
      {out.view}
      <h3>Deposits</h3>
      <button type="button" onClick={() => void out.run(async () => (await api.POST('/v1/billing/deposits/refresh'), deposits.reload()), 'Pending deposits checked again')}>
        Check pending deposits again
      </button>
      <ListOf load={deposits} what="deposits" empty="No deposits yet.">
        {(ds) => (
          <DataTable name="deposits" columns={['When', 'Status', 'Amount', 'Transaction']} times>
                {ds.map((d) => (
                  <tr key={d.id} data-cost={d.amount_micro_usd}>
                    <td>{when(d.created_at)}</td>
                    <td>
                      {d.status}
                      {d.status === 'pending' ? ` (${d.confirmations}/${d.required_confirmations})` : d.reason ? ` (${d.reason})` : ''}
                    </td>
                    <td>{usd(d.amount_micro_usd)}</td>
                    <td>
                      <code>{d.tx_hash}</code> <span class="muted">{d.chain}</span>
                    </td>
                  </tr>
                ))}
              </DataTable>
        )}
      </ListOf>
    </>
  );
}

function Ledger() {
  const { cursor, Pager } = useCursorPages();
  const page = useLoad(() => data(api.GET('/v1/billing/ledger', { params: { query: { limit: 20, ...(cursor ? { cursor } : {}) } } })), [cursor]);
  const entries = mapLoad(page, (p) => p.entries);
  const next = page.state === 'ready' && page.data.has_more ? page.data.next_cursor : null;
  return (
    <>
      <h2>Ledger</h2>
      <ListOf load={entries} what="the ledger" empty="No ledger entries yet.">
        {(es) => (
          <DataTable name="ledger" columns={['When', 'Entry', 'Amount', 'Balance after']} times>
                {es.map((e) => (
                  <tr key={e.id} data-amount={e.amount_micro_usd}>
                    <td>{when(e.created_at)}</td>
                    <td>
                      {e.kind} <span class="muted">{e.ref}</span>
                    </td>
                    <td>{usd(e.amount_micro_usd)}</td>
                    <td>{usd(e.balance_after_micro_usd)}</td>
                  </tr>
                ))}
              </DataTable>
        )}
      </ListOf>
      <Pager next={next} />
    </>
  );
}

function Plans() {
  const plans = useLoad(() => data(api.GET('/v1/billing/plans')));
  const sub = useLoad(() => data(api.GET('/v1/billing/subscription')));
  const out = useOutcome();
  return (
    <>
      <h2>Plan</h2>
      <Loaded load={sub} what="your subscription">
        {(s) => (
          <p data-figure="plan">
            On <strong>{s.plan.name}</strong>
            {s.period_end ? `, ${s.auto_renew ? 'renews' : 'ends'} ${when(s.period_end)}` : ''}
            {s.scheduled_plan ? `, then ${s.scheduled_plan}` : ''}.{' '}
            {s.auto_renew && s.period_end && (
              <ConfirmButton
                label="Cancel auto-renew"
                title="Cancel auto-renew?"
                details={() => <p>The plan stays until {when(s.period_end)}, then drops to Free.</p>}
                onConfirm={async () => {
                  await api.POST('/v1/billing/subscription/cancel');
                  sub.reload();
                }}
              />
            )}
          </p>
        )}
      </Loaded>
      {out.view}
      <ListOf load={mapLoad(plans, (p) => p.plans)} what="plans" empty="No plans are published.">
        {(ps) => (
          <ul class="cards" data-list="plans">
            {ps.map((p) => (
              <li key={p.id} class="card">
                <h3>{p.name}</h3>
                <p>{usd(p.monthly_fee_micro_usd)} a month, usage kept {p.retention_days} days</p>
                <ConfirmButton
                  label={`Choose ${p.name}`}
                  title={`Change to ${p.name}?`}
                  danger={false}
                  details={() => <p>{p.monthly_fee_micro_usd > 0 ? `${usd(p.monthly_fee_micro_usd)} is debited from your prepaid balance now.` : 'No fee.'}</p>}
                  onConfirm={async () => {
                    await api.POST('/v1/billing/subscription', { body: { plan: p.id } });
                    sub.reload();
                  }}
                />
              </li>
            ))}
          </ul>
        )}
      </ListOf>
    </>
  );
}
