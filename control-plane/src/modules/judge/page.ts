import { Html, html, type Page } from '../../http/pages.ts';
import { anchorSection, checkYourself, receiptSection, verdictSection } from '../pages/parts.ts';
import type { JudgeService } from './service.ts';
import { VERDICT_CHECKS, type VerdictPageData } from './verify.ts';

export type PublicVerdict = Awaited<ReturnType<JudgeService['publicView']>>;

/** JSON inside a data block: nothing in it can end the script element or open markup. */
function dataBlock(d: VerdictPageData): Html {
  const json = JSON.stringify(d)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
  return new Html(`<script type="application/json" id="svc-data">${json}</script>`);
}

/** The page of a published verdict, `/j/{id}`: question, options, votes with rationales, tally, evidence, signed outcome, anchor. */
export function verdictPage(v: PublicVerdict, signer: string): Omit<Page, 'scriptSrc' | 'style'> {
  return {
    title: `Verdict ${v.id}`,
    body: html`<p class="eyebrow">Judge verdict</p>
<h1><code>${v.id}</code></h1>
${verdictSection('signed verdict', [...VERDICT_CHECKS])}
<h2>Question</h2><pre id="question" class="text">${v.question}</pre>
<dl><dt>Outcome</dt><dd id="outcome">${v.outcome ?? 'none (a tie, or no vote)'}</dd>
<dt>Tally</dt><dd>${v.tally.map((t, i) => html`${i ? ', ' : ''}${t.option}: ${t.votes}`)}${v.abstentions ? html`; ${v.abstentions} abstained` : ''}</dd>
<dt>Decided</dt><dd>${v.decision_rule}</dd>
<dt>Signed</dt><dd>${v.created_at}</dd></dl>
<h2>Jurors</h2>
${v.jurors.map(
  (j, i) => html`<section class="juror" data-juror="${i}"><p><strong>${j.model}</strong>: ${j.abstained ? html`<span class="abstained">abstained</span> (${j.abstain_reason})` : html`voted <strong>${j.vote}</strong>`}</p>
${j.rationale !== null ? html`<pre class="text rationale">${j.rationale}</pre>` : ''}
<p class="muted">Receipt <code>${j.receipt_id ?? 'none'}</code>${j.rationale_sha256 ? html`; rationale sha256 <code>${j.rationale_sha256}</code>` : ''}</p></section>`,
)}
<h2>Evidence</h2>
<dl><dt>Root</dt><dd><code id="evidence-root">${v.evidence.root}</code></dd>
${v.evidence.items.map((e) => html`<dt>${e.label}</dt><dd><code>${e.sha256}</code></dd>`)}</dl>
<p class="muted">Leaf: ${v.evidence.leaf}. Tree: ${v.evidence.tree}. The evidence itself is not kept: whoever holds it recomputes each sha256.</p>
${receiptSection(v.receipt, signer)}
${anchorSection(v.anchor, '')}
<h2>What this proves</h2><p class="muted">${v.trust_model}</p>
${checkYourself(`/v1/judge/public/${encodeURIComponent(v.id)}`, 'Hash the question and each rationale (sha256 of the UTF-8 text) and compare them with the fingerprints in the payload.')}
${dataBlock({
  kind: 'verdict',
  id: v.id,
  signer,
  receipt: { canonical: v.receipt.canonical, signature: v.receipt.signature },
  question: v.question,
  rationales: v.jurors.map((j) => j.rationale),
  anchor: v.anchor,
})}`,
  };
}
