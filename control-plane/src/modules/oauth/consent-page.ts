import type { FastifyReply } from 'fastify';
import { SCOPES, type Scope } from '@svc/shared';
import { html, sendPage } from '../../http/pages.ts';

/** Where the authorization endpoint sends the browser: the consent page this gateway serves. */
export const CONSENT_PAGE_PATH = '/oauth/consent';

export interface ConsentView {
  request_id: string;
  client_id: string;
  client_name: string;
  redirect_uri: string;
  scopes: string[];
  /** A client identified by its metadata document URL rather than registered here. */
  metadata_document: boolean;
}

/**
 * The browser half of consent: loads the signed-in account (`GET /v1/auth/me`, the session cookie), then
 * answers with `POST /v1/oauth/authorize/approve` and follows the `redirect_to` it returns. Same origin,
 * so the cookie session passes the gateway's CSRF check.
 */
const SCRIPT = `
const root = document.getElementById('consent');
const status = document.getElementById('status');
const buttons = Array.from(document.querySelectorAll('button'));
const say = (text, error) => { status.textContent = text; status.className = error ? 'error' : 'muted'; };
fetch('/v1/auth/me', { credentials: 'same-origin' }).then(async (r) => {
  if (!r.ok) return say('You are not signed in to this gateway in this browser: sign in, then reload this page.', true);
  const me = await r.json();
  say('Signed in as ' + (me.wallet_address || me.account_id));
  buttons.forEach((b) => { b.disabled = false; });
}).catch(() => say('The gateway could not be reached; reload this page.', true));
async function answer(approve) {
  buttons.forEach((b) => { b.disabled = true; });
  say(approve ? 'Approving...' : 'Declining...');
  try {
    const r = await fetch('/v1/oauth/authorize/approve', {
      method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ request_id: root.dataset.request, approve }),
    });
    const body = await r.json().catch(() => null);
    if (r.ok && body && body.redirect_to) { location.assign(body.redirect_to); return; }
    say((body && body.error && body.error.message) || ('The gateway answered HTTP ' + r.status), true);
  } catch (e) {
    say('The gateway could not be reached: ' + e, true);
  }
}
document.getElementById('approve').addEventListener('click', () => answer(true));
document.getElementById('deny').addEventListener('click', () => answer(false));
`;

export function sendConsentPage(reply: FastifyReply, v: ConsentView): FastifyReply {
  const target = new URL(v.redirect_uri);
  const scopes = v.scopes.map((s) => html`<li><code>${s}</code>: ${SCOPES[s as Scope] ?? ''}</li>`);
  return sendPage(reply, {
    title: `Allow ${v.client_name}?`,
    body: html`<div id="consent" data-request="${v.request_id}">
<h1>Allow <strong>${v.client_name}</strong> to use your account?</h1>
<p class="muted">${v.metadata_document ? html`Client <code>${v.client_id}</code>` : html`Registered client <code>${v.client_id}</code>`};
after you answer, your browser returns to <code>${target.origin}</code>.</p>
<p>It will act as your account, metered and receipted like an API key, with these scopes:</p>
<ul>${scopes}</ul>
<p class="muted">You can withdraw this at any time: <code>DELETE /v1/oauth/consents/{id}</code>.</p>
<p id="status" class="muted">Checking your sign-in...</p>
<div class="actions"><button id="approve" class="primary" type="button" disabled>Approve</button><button id="deny" type="button" disabled>Deny</button></div>
</div>`,
    script: SCRIPT,
  });
}

/** An authorization that cannot go back to the client (unknown client, unregistered redirect URI): shown here. */
export function sendErrorPage(reply: FastifyReply, status: number, error: string, description: string): FastifyReply {
  return sendPage(reply, {
    status,
    title: 'Authorization failed',
    body: html`<h1>This authorization request cannot be served</h1>
<p class="error"><code>${error}</code>: ${description}</p>
<p class="muted">Nothing was sent back to the application. Start again from the application that sent you here.</p>`,
  });
}
