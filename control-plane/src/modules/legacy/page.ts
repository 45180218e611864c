import { html, type Page } from '../../http/pages.ts';

const STATUS_TEXT: Record<'active' | 'warning' | 'released', string> = {
  active: 'Not released. The owner is checking in; nothing can be opened.',
  warning: 'Not released yet. The owner missed a check-in and the plan is in its grace period; it is released only if the grace period ends without a check-in (and, where the plan names attesters, once enough of them confirm).',
  released: 'Released. Sign in with the wallet below to open the note and the files.',
};

const STYLE = `dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .75rem} dt{color:#57534e} dd{margin:0;overflow-wrap:anywhere}
  .status{font-weight:600;padding:.6rem .8rem;border-radius:8px;background:#f5f5f4} .status.released{background:#dcfce7;color:#14532d}`;

/** The page of a claim link, `/legacy/claim/{token}`: what the link is for and how its beneficiary opens it. */
export function claimPage(c: { plan_name: string; wallet_required: string; status: 'active' | 'warning' | 'released' }): Page {
  return {
    title: `Legacy plan: ${c.plan_name}`,
    style: STYLE,
    body: html`<p class="muted">Legacy plan claim</p>
<h1 id="plan-name">${c.plan_name}</h1>
<p id="status" class="status ${c.status}" data-status="${c.status}">${STATUS_TEXT[c.status]}</p>
<dl><dt>Wallet required</dt><dd><code id="wallet">${c.wallet_required}</code></dd></dl>
<h2>How to open it</h2>
<ol><li>Sign in to this gateway with the wallet above (Sign-In with Ethereum: <code>POST /v1/auth/nonce</code>, then <code>POST /v1/auth/verify</code>).</li>
<li>Once released, the plan is listed at <code>GET /v1/legacy/claims</code>; open it with <code>POST /v1/legacy/claims/{plan_id}/open</code>.</li></ol>
<p class="muted">Only a session holding this wallet can open the plan. This link shows no content, and stops working if the owner cancels the plan.</p>`,
  };
}

/** Unknown and cancelled links: one page, the same for both. */
export function claimNotFoundPage(): Page {
  return { status: 404, title: 'Not found', body: html`<h1>Not found</h1><p>No legacy claim here: the link is wrong, or it no longer works.</p>` };
}
