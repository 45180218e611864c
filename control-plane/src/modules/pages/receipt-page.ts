import { html, type Page } from '../../http/pages.ts';
import type { AnchorField } from '../anchors/service.ts';
import { formatUsd } from '../proofs/badge.ts';
import type { Receipts } from '../proofs/receipts.ts';
import { anchorSection, checkYourself, dataBlock, receiptSection, verdictSection } from './parts.ts';

export type SharedReceipt = ReturnType<Receipts['publicView']>;

/** Receipt kinds whose hash is queued for the public anchors when they are minted. */
export const ANCHORED_KINDS = new Set(['notary']);

/** The page of a receipt its owner shared, `/r/{request_id}`. */
export function receiptPage(r: SharedReceipt, signer: string, anchor: AnchorField | null): Omit<Page, 'scriptSrc' | 'style'> {
  const p = r.payload ?? {};
  const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : null);
  const cost = typeof p.cost_micro_usd === 'number' && Number.isSafeInteger(p.cost_micro_usd) ? formatUsd(p.cost_micro_usd) : null;
  const rows: Array<[string, string | null]> = [
    ['Kind', r.kind],
    ['Route', str(p.route)],
    ['Model', str(p.model)],
    ['Cost', cost],
    ['Created', str(p.created_at) ?? r.created_at],
    ['Run', r.run_id ? `${r.run_id} (receipt ${r.run_seq})` : null],
  ];
  return {
    title: `Receipt ${r.id}`,
    body: html`<p class="eyebrow">Shared receipt</p>
<h1><code>${r.id}</code></h1>
${verdictSection('signature', ['signature', 'binding', 'anchor'])}
<dl>${rows.filter(([, v]) => v !== null).map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
<p class="muted">A receipt holds metadata of one response, never its content.</p>
${receiptSection(r, signer)}
${anchorSection(anchor, 'This receipt is not anchored by itself; a run proof anchors the head hash of its run.')}
${checkYourself(`/v1/receipts/shared/${encodeURIComponent(r.id)}`)}
${dataBlock({
  kind: 'receipt',
  id: r.id,
  signer,
  receipt: { canonical: r.canonical, signature: r.signature },
  anchor,
})}`,
  };
}
