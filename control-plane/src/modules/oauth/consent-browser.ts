/**
 * The consent page's script (bundled for the browser by http/scripts.ts): checks the signed-in account
 * (`GET /v1/auth/me`, the session cookie); without one, offers sign-in in place, with a passkey (when the
 * gateway has passkeys) or a browser wallet (EIP-1193 `window.ethereum`, Sign-In with Ethereum); then answers
 * with `POST /v1/oauth/authorize/approve` and follows the `redirect_to` it returns. Same origin throughout, so
 * the cookie session passes the gateway's CSRF check.
 */
import { messageHex, siweMessage } from '../identity/siwe-message.ts';

// The few browser APIs this script uses (the project compiles without the DOM library).
interface Eip1193 {
  request(a: { method: string; params?: unknown[] }): Promise<unknown>;
}
interface El {
  textContent: string | null;
  className: string;
  hidden: boolean;
  disabled: boolean;
  dataset: Record<string, string | undefined>;
  addEventListener(type: 'click', f: () => void): void;
}
interface PublicKeyCredential {
  toJSON(): unknown;
}
declare const document: { getElementById(id: string): El };
declare const window: { ethereum?: Eip1193 };
declare const location: { assign(url: string): void };
declare const navigator: { credentials: { get(o: { publicKey: unknown }): Promise<PublicKeyCredential | null> } };
declare const PublicKeyCredential: { parseRequestOptionsFromJSON(o: unknown): unknown };

const el = (id: string) => document.getElementById(id);
const root = el('consent');
const status = el('status');
const answers = [el('approve'), el('deny')];
const signIn = el('sign-in');
const withPasskey = el('sign-in-passkey');
const withWallet = el('sign-in-wallet');

const say = (text: string, error = false) => {
  status.textContent = text;
  status.className = error ? 'error' : 'muted';
};
const post = (path: string, body: unknown) =>
  fetch(path, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const failure = async (r: Response) => {
  const body = (await r.json().catch(() => null)) as { error?: { message?: string } } | null;
  return body?.error?.message ?? `The gateway answered HTTP ${r.status}`;
};

async function checkSession(): Promise<void> {
  const r = await fetch('/v1/auth/me', { credentials: 'same-origin' });
  if (!r.ok) {
    say('Sign in to this gateway to answer.');
    signIn.hidden = false;
    withPasskey.hidden = root.dataset.passkey !== 'true';
    withWallet.hidden = !window.ethereum;
    if (withPasskey.hidden && withWallet.hidden) say('You are not signed in to this gateway in this browser, and it offers no way to sign in here: sign in, then reload this page.', true);
    return;
  }
  const me = (await r.json()) as { wallet_address?: string | null; account_id: string };
  signIn.hidden = true;
  say(`Signed in as ${me.wallet_address ?? me.account_id}`);
  answers.forEach((b) => (b.disabled = false));
}

async function passkeySignIn(): Promise<void> {
  const options = await (await post('/v1/auth/passkey/login/options', {})).json();
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
  if (!credential) throw new Error('no passkey was chosen');
  const r = await post('/v1/auth/passkey/login/verify', { credential: credential.toJSON() });
  if (!r.ok) throw new Error(await failure(r));
}

async function walletSignIn(): Promise<void> {
  const eth = window.ethereum!;
  const [account] = (await eth.request({ method: 'eth_requestAccounts' })) as string[];
  if (!account) throw new Error('the wallet gave no account');
  const chains = JSON.parse(root.dataset.chains ?? '[1]') as number[];
  const current = Number(await eth.request({ method: 'eth_chainId' }).catch(() => NaN));
  const chainId = chains.includes(current) ? current : chains[0]!;
  const n = await post('/v1/auth/nonce', {});
  if (!n.ok) throw new Error(await failure(n));
  const { nonce, expires_at } = (await n.json()) as { nonce: string; expires_at: string };
  // Issued now by the gateway's clock (its nonce lives 5 minutes), not the device's, which may be off.
  const message = siweMessage({ domain: root.dataset.domain!, origin: root.dataset.origin!, address: account, statement: "Sign in to answer a connector's request.", chainId, nonce, nonceExpiresAt: expires_at });
  const signature = await eth.request({ method: 'personal_sign', params: [messageHex(message), account] });
  const r = await post('/v1/auth/verify', { message, signature });
  if (!r.ok) throw new Error(await failure(r));
}

function signInWith(how: () => Promise<void>) {
  return async () => {
    [withPasskey, withWallet].forEach((b) => (b.disabled = true));
    say('Signing in...');
    try {
      await how();
      await checkSession();
    } catch (e) {
      say(`Sign-in failed: ${(e as Error).message ?? e}`, true);
    } finally {
      [withPasskey, withWallet].forEach((b) => (b.disabled = false));
    }
  };
}

async function answer(approve: boolean): Promise<void> {
  answers.forEach((b) => (b.disabled = true));
  say(approve ? 'Approving...' : 'Declining...');
  try {
    const r = await post('/v1/oauth/authorize/approve', { request_id: root.dataset.request, approve });
    const body = (await r.json().catch(() => null)) as { redirect_to?: string } | null;
    if (r.ok && body?.redirect_to) {
      location.assign(body.redirect_to);
      return;
    }
    say(r.ok ? 'The gateway gave nowhere to return to.' : await failure(r), true);
  } catch (e) {
    say(`The gateway could not be reached: ${e}`, true);
  }
}

withPasskey.addEventListener('click', signInWith(passkeySignIn));
withWallet.addEventListener('click', signInWith(walletSignIn));
answers[0]!.addEventListener('click', () => void answer(true));
answers[1]!.addEventListener('click', () => void answer(false));
checkSession().catch(() => say('The gateway could not be reached; reload this page.', true));
