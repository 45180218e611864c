import { Html, html } from '../../http/pages.ts';
import type { AnchorField } from '../anchors/service.ts';
import type { PageData } from './verify.ts';

/** An interpolation rather than a literal in the templates, so the built script stays ASCII (half the memory). */
const ELLIPSIS = '\u2026';

/** The pages' own CSS beside the template's: phone-width first, long hex wraps. */
export const PAGE_STYLE = `
  main{margin:1rem auto;padding:1.25rem;overflow-wrap:anywhere} @media (min-width:40rem){main{margin:3rem auto;padding:2rem}}
  h2{font-size:1.05rem;margin:1.5rem 0 .5rem} .eyebrow{margin:0;color:#57534e;font-size:.8rem;text-transform:uppercase;letter-spacing:.06em}
  dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .75rem;margin:0} dt{color:#57534e} dd{margin:0;min-width:0}
  pre{white-space:pre-wrap;word-break:break-all;background:#f5f5f4;padding:.75rem;border-radius:8px;font-size:.85rem;margin:.25rem 0}
  pre.text{word-break:normal;overflow-wrap:anywhere;font:inherit;background:#fafaf9;border:1px solid #e7e5e4}
  .verdict{font-weight:600;padding:.6rem .8rem;border-radius:8px;background:#f5f5f4}
  .verdict.valid{background:#dcfce7;color:#14532d} .verdict.invalid{background:#fee2e2;color:#7f1d1d}
  .checks{list-style:none;padding:0;font-size:.9rem} .check.ok{color:#15803d} .check.failed{color:#b91c1c} .check.absent{color:#57534e}
  a{color:#1d4ed8}
`;

/** JSON inside a data block: nothing in it can end the script element or open markup. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** The data the page's script verifies, embedded as a non-executed JSON block. */
export function dataBlock(d: PageData): Html {
  return new Html(`<script type="application/json" id="svc-data">${scriptJson(d)}</script>`);
}

/** The verdict the script fills in, with one row per check; without scripts the page says how to check by hand. */
export function verdictSection(what: string, checks: string[]): Html {
  return html`<p id="verdict" class="verdict" data-verdict="pending" role="status">Checking the ${what} in your browser${ELLIPSIS}</p>
<ul class="checks">${checks.map((c) => html`<li class="check" data-check="${c}" data-state="pending"></li>`)}</ul>
<noscript><p class="muted">Scripts are off: nothing was checked in this browser. Check the receipt yourself as described below.</p></noscript>`;
}

export function receiptSection(r: { canonical: string; signature: string; hash: string }, signer: string): Html {
  return html`<h2>Signed receipt</h2>
<dl><dt>Signer</dt><dd><code>${signer}</code> (published at <a href="/v1/receipts/pubkey">/v1/receipts/pubkey</a>)</dd>
<dt>Recovered</dt><dd><code id="recovered">${ELLIPSIS}</code></dd>
<dt>Hash</dt><dd><code>${r.hash}</code></dd>
<dt>Signature</dt><dd><code>${r.signature}</code></dd></dl>
<p class="muted">Payload (RFC 8785 canonical JSON, the exact text signed):</p>
<pre id="canonical">${r.canonical}</pre>`;
}

export function anchorSection(a: AnchorField | null, none: string): Html {
  if (!a) return html`<h2>Public anchor</h2><p class="muted">${none}</p>`;
  const states: Record<AnchorField['state'], string> = {
    pending: 'pending: queued, or batched and not yet confirmed on a chain',
    anchored: 'anchored: its batch root is on a chain',
    failed: 'failed: the last attempt on every chain failed; attempts go on',
    not_anchored: 'not anchored: no chain is configured on this gateway (the batch and its inclusion proof exist all the same)',
  };
  return html`<h2>Public anchor</h2>
<dl><dt>State</dt><dd id="anchor-state" data-state="${a.state}">${states[a.state]}</dd>
<dt>Leaf</dt><dd><code>${a.hash}</code></dd>
${
  a.root
    ? html`<dt>Batch root</dt><dd><a id="anchor-root" href="/v1/anchors/${a.root}"><code>${a.root}</code></a></dd>
<dt>Position</dt><dd>leaf ${a.leaf_index} of ${a.tree_size} (RFC 6962 tree; the audit path has ${a.proof.length} hashes)</dd>`
    : html`<dt>Batch root</dt><dd>not batched yet</dd>`
}
${a.anchors.map((c) => html`<dt>${c.backend}</dt><dd>chain ${c.chain_id}: ${c.state}${c.tx_hash ? html`, transaction <code>${c.tx_hash}</code> in block ${c.block_number}` : ''}</dd>`)}</dl>`;
}

/** The JSON record of the page's artifact, and how to check it without this page. */
export function checkYourself(jsonUrl: string, extra: Html | string = ''): Html {
  return html`<h2>Check it yourself</h2>
<p class="muted">Recover the signer of the canonical payload with any Ethereum library (EIP-191 personal_sign, for example viem's
<code>recoverMessageAddress</code>) and compare it with the published signer. ${extra}
The same record as JSON: <a href="${jsonUrl}"><code>${jsonUrl}</code></a>.</p>`;
}
