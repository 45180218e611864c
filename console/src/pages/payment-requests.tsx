import { useState } from 'preact/hooks';
import { data, keyApi, type Res } from '../api.ts';
import { parseUsd, usd, when } from '../format.ts';
import { useOutcome, TextField } from '../ui/actions.tsx';
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
          <TextField label="Chain" id="p-chain" value={chain} set={setChain} hint="a chain of the deposit table, e.g. its CAIP-2 id" required />
          <TextField label="Payee address" id="p-payee" value={payee} set={setPayee} required />
          <TextField label="Amount (USD)" id="p-amount" value={amount} set={setAmount} required inputMode="decimal" />
          <TextField label="Memo (optional)" id="p-memo" value={memo} set={setMemo} />
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
        <TextField label="Payment request id" id="p-lookup" value={lookup} set={setLookup} required />
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
