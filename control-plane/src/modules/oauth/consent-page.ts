import type { FastifyReply } from 'fastify';
import { SCOPES, type Scope } from '@svc/shared';
import { html, sendPage } from '../../http/pages.ts';
import { BrowserScript } from '../../http/scripts.ts';

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

/** The browser half of consent (consent-browser.ts): sign-in in place when needed, then the answer. */
export const consentScript = new BrowserScript('/assets/consent.js', new URL('./consent-browser.ts', import.meta.url));

/** How the page offers sign-in: the SIWE domain and origin, the accepted chains, and whether passkeys are on. */
export interface SignInOptions {
  publicUrl: URL;
  chainIds: number[];
  passkey: boolean;
}

export async function sendConsentPage(reply: FastifyReply, v: ConsentView, signIn: SignInOptions): Promise<FastifyReply> {
  const target = new URL(v.redirect_uri);
  const scopes = v.scopes.map((s) => html`<li><code>${s}</code>: ${SCOPES[s as Scope] ?? ''}</li>`);
  return sendPage(reply, {
    title: `Allow ${v.client_name}?`,
    body: html`<div id="consent" data-request="${v.request_id}" data-domain="${signIn.publicUrl.host}" data-origin="${signIn.publicUrl.origin}" data-chains="${JSON.stringify(signIn.chainIds)}" data-passkey="${String(signIn.passkey)}">
<h1>Allow <strong>${v.client_name}</strong> to use your account?</h1>
<p class="muted">${v.metadata_document ? html`Client <code>${v.client_id}</code>` : html`Registered client <code>${v.client_id}</code>`};
after you answer, your browser returns to <code>${target.origin}</code>.</p>
<p>It will act as your account, metered and receipted like an API key, with these scopes:</p>
<ul>${scopes}</ul>
<p class="muted">You can withdraw this at any time: <code>DELETE /v1/oauth/consents/{id}</code>.</p>
<p id="status" class="muted">Checking your sign-in...</p>
<div id="sign-in" class="actions" hidden><button id="sign-in-passkey" type="button" hidden>Sign in with a passkey</button><button id="sign-in-wallet" type="button" hidden>Sign in with a browser wallet</button></div>
<div class="actions"><button id="approve" class="primary" type="button" disabled>Approve</button><button id="deny" type="button" disabled>Deny</button></div>
</div>`,
    scriptSrc: await consentScript.src(reply),
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
