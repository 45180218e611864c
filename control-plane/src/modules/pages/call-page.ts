import { html, type Page } from '../../http/pages.ts';
import type { CallsService } from '../calls/service.ts';
import { anchorSection, checkYourself, dataBlock, receiptSection, verdictSection } from './parts.ts';

export type PublicCall = Awaited<ReturnType<CallsService['publicView']>>;

/** The page of a sealed call, `/c/{id}`: its commitment, receipt and anchor, and its text once revealed. */
export function callPage(c: PublicCall, signer: string): Omit<Page, 'scriptSrc' | 'style'> {
  const content =
    c.state === 'revealed'
      ? html`<h2>Revealed text</h2><pre id="text" class="text">${c.text}</pre>
<dl><dt>Salt</dt><dd><code id="salt">${c.salt_hex}</code></dd></dl>`
      : c.state === 'withdrawn'
        ? html`<h2>Text</h2><p id="text-state">Withdrawn ${c.withdrawn_at}: the text and salt are destroyed, so this commitment can never be opened. The commitment, its receipt and its anchor stay.</p>`
        : html`<h2>Text</h2><p id="text-state">Not revealed yet: the text and its salt are sealed until the account that committed reveals them.</p>`;
  return {
    title: `Sealed call ${c.id}`,
    body: html`<p class="eyebrow">Sealed call</p>
<h1><code>${c.id}</code></h1>
${verdictSection('signed receipt and commitment', ['signature', 'binding', 'commitment', 'anchor'])}
<dl><dt>State</dt><dd id="state">${c.state}</dd>
<dt>Committed</dt><dd>${c.created_at}</dd>
${c.revealed_at ? html`<dt>Revealed</dt><dd>${c.revealed_at}</dd>` : ''}
${c.withdrawn_at ? html`<dt>Withdrawn</dt><dd>${c.withdrawn_at}</dd>` : ''}
<dt>Commitment</dt><dd><code id="commitment">${c.commitment}</code></dd></dl>
<p class="muted">${c.commitment_scheme}.</p>
${content}
${receiptSection(c.receipt, signer)}
${anchorSection(c.anchor, '')}
<h2>What this proves</h2><p class="muted">${c.trust_model}</p>
${checkYourself(`/v1/calls/public/${encodeURIComponent(c.id)}`, 'Once revealed, recompute sha256 of the salt bytes followed by the UTF-8 bytes of the text and compare it with the commitment.')}
${dataBlock({
  kind: 'call',
  id: c.id,
  signer,
  receipt: { canonical: c.receipt.canonical, signature: c.receipt.signature },
  call: { commitment: c.commitment, text: c.text, salt_hex: c.salt_hex },
  anchor: c.anchor,
})}`,
  };
}
