import { useState } from 'preact/hooks';
import { data, keyApi, type Res } from '../api.ts';
import { parseUsd, usd, when } from '../format.ts';
import { Field, useOutcome } from '../ui/actions.tsx';
import { WithTabKey } from '../ui/tab-key.tsx';

type PaymentRequest = Res<'/v1/pay/requests/{id}', 'get'>;

/** Payment requests: signed invoices paid on chain from payer to payee (the gateway holds nothing); key routes. */
export function PaymentRequests() {
  return (
    <>
      <h2>Payment requests</h2>
      <WithTabKey scopes={['billing', 'sandboxes']} why="Payment requests are made with an API key (the billing scope).">
        <Requests />
      </WithTabKey>
    </>
  );
}

function Requests() {
  const [chain, setChain] = useState('');
  const [payee, setPayee] = useState('');
  const [amount, setAmount] = useState('');
  const [memo, setMemo] = useState('');
  const [lookup, setLookup] = useState('');
  const [shown, setShown] = useState<PaymentRequest[]>([]);
  const out = useOutcome();
  const show = (p: PaymentRequest) => setShown((xs) => [p, ...xs.filter((x) => x.id !== p.id)]);
  return (
    <>
      <form
        class="card"
        aria-label="Create a payment request"
        onSubmit={(e) => {
          e.preventDefault();
          const micro = parseUsd(amount);
          if (micro === null) return out.say('Amount: dollars, e.g. 25', true);
          void out.run(async () => show(await data(keyApi.POST('/v1/pay/requests', { body: { chain, payee, amount_micro_usd: micro, ...(memo ? { memo } : {}) } }))), 'Payment request made');
        }}
      >
        <div class="grid">
          <Field label="Chain" id="p-chain" hint="a chain of the deposit table, e.g. its CAIP-2 id">
            <input id="p-chain" required value={chain} onInput={(e) => setChain((e.target as HTMLInputElement).value)} aria-describedby="p-chain-hint" />
          </Field>
          <Field label="Payee address" id="p-payee">
            <input id="p-payee" required value={payee} onInput={(e) => setPayee((e.target as HTMLInputElement).value)} />
          </Field>
          <Field label="Amount (USD)" id="p-amount">
            <input id="p-amount" required inputMode="decimal" value={amount} onInput={(e) => setAmount((e.target as HTMLInputElement).value)} />
          </Field>
          <Field label="Memo (optional)" id="p-memo">
            <input id="p-memo" value={memo} onInput={(e) => setMemo((e.target as HTMLInputElement).value)} />
          </Field>
        </div>
        <button type="submit">Create payment request</button>
      </form>
      <form
        class="inline"
        aria-label="Look up a payment request"
        onSubmit={(e) => {
          e.preventDefault();
          void out.run(async () => show(await data(keyApi.GET('/v1/pay/requests/{id}', { params: { path: { id: lookup.trim() } } }))));
        }}
      >
        <Field label="Payment request id" id="p-lookup">
          <input id="p-lookup" required value={lookup} onInput={(e) => setLookup((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit">Look up</button>
      </form>
      {out.view}
      {shown.length === 0 ? (
        <p class="state empty">No payment request shown: create one, or look one up by its id.</p>
      ) : (
        <ul class="rows" data-list="payment-requests">
          {shown.map((p) => (
            <li key={p.id}>
              <code>{p.id}</code> <span class="tag">{p.status}</span> {usd(p.amount_micro_usd)} to <code>{p.payee}</code> on {p.chain}, until {when(p.expires_at)}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}
