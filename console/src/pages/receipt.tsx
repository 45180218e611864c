import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';
import { verifyPage, type Verdict } from '../../../control-plane/src/modules/pages/verify.ts';
import { api, data } from '../api.ts';
import { usd, when } from '../format.ts';
import { Link } from '../router.tsx';
import { useOutcome } from '../ui/actions.tsx';
import { Loaded, useLoad } from '../ui/load.tsx';

/**
 * One receipt: its signed payload, checked here in the browser with the same checks the public /r/{id} page
 * runs (EIP-191 recovery of the canonical text against the signer the gateway publishes, the payload naming
 * this receipt), plus its sha256. Nothing is sent back to be verified.
 */
async function load(id: string) {
  const [receipt, pubkey] = await Promise.all([data(api.GET('/v1/receipts/{id}', { params: { path: { id } } })), data(api.GET('/v1/receipts/pubkey'))]);
  const verdict: Verdict = verifyPage({ kind: 'receipt', id: receipt.id, signer: receipt.signer ?? '', receipt: { canonical: receipt.canonical, signature: receipt.signature }, anchor: null }, pubkey.address);
  const hashOk = `0x${bytesToHex(sha256(utf8ToBytes(receipt.canonical)))}` === receipt.hash.toLowerCase();
  return { receipt, pubkey, verdict, hashOk };
}

export function Receipt(props: { id: string }) {
  const r = useLoad(() => load(props.id), [props.id]);
  const out = useOutcome();
  return (
    <section>
      <p>
        <Link href="/usage">← Usage</Link>
      </p>
      <h1>Receipt</h1>
      <Loaded load={r} what="the receipt">
        {({ receipt, pubkey, verdict, hashOk }) => {
          const valid = verdict.valid && hashOk;
          const cost = (receipt.payload as Record<string, unknown> | null)?.cost_micro_usd;
          return (
            <>
              <p class={valid ? 'verdict ok' : 'verdict failed'} role="status" data-verdict={valid ? 'valid' : 'invalid'}>
                {valid ? 'Verified in this browser: ' : 'Not verified: '}
                {valid ? `the signature recovers ${verdict.recovered}, the gateway's published signer.` : [...verdict.reasons, ...(hashOk ? [] : ['the hash is not sha256 of the signed text'])].join('; ')}
              </p>
              <dl class="facts">
                <dt>Receipt id</dt>
                <dd>
                  <code>{receipt.id}</code>
                </dd>
                <dt>Kind</dt>
                <dd>{receipt.kind}</dd>
                <dt>Cost</dt>
                <dd data-figure="cost">{typeof cost === 'number' ? usd(cost) : '-'}</dd>
                <dt>Signed at</dt>
                <dd>{when(receipt.created_at)}</dd>
                <dt>Published signer</dt>
                <dd>
                  <code>{pubkey.address}</code>
                </dd>
                <dt>sha256</dt>
                <dd>
                  <code>{receipt.hash}</code>
                </dd>
                <dt>Public page</dt>
                <dd>
                  {receipt.shared ? <a href={`/r/${encodeURIComponent(receipt.id)}`}>/r/{receipt.id}</a> : 'not shared'}{' '}
                  <button
                    type="button"
                    onClick={() =>
                      void out.run(async () => {
                        await (receipt.shared ? api.DELETE('/v1/receipts/{id}/share', { params: { path: { id: receipt.id } } }) : api.POST('/v1/receipts/{id}/share', { params: { path: { id: receipt.id } } }));
                        r.reload();
                      })
                    }
                  >
                    {receipt.shared ? 'Stop sharing' : 'Share publicly'}
                  </button>
                </dd>
              </dl>
              {out.view}
              <h2>Signed payload</h2>
              <pre class="payload" tabIndex={0} aria-label="The signed payload (canonical JSON)">
                {JSON.stringify(receipt.payload, null, 2)}
              </pre>
              <h2>Signature</h2>
              <pre class="payload" tabIndex={0} aria-label="The signature">
                {receipt.signature}
              </pre>
            </>
          );
        }}
      </Loaded>
    </section>
  );
}
