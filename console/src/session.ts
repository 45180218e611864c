import { messageHex, siweMessage } from '../../control-plane/src/modules/identity/siwe-message.ts';
import { api, data, ApiError } from './api.ts';
import { tabClear, tabSet } from './tab.ts';

/** Sign-in and sign-out, over the same routes the CLI uses; the session cookie is set by the gateway. */
interface Eip1193 {
  request(a: { method: string; params?: unknown[] }): Promise<unknown>;
}
declare global {
  interface Window {
    ethereum?: Eip1193;
  }
}

export const hasWallet = () => Boolean(window.ethereum);

/** Sign-In with Ethereum through the page's EIP-1193 provider. */
export async function walletSignIn(): Promise<void> {
  const eth = window.ethereum;
  if (!eth) throw new Error('No browser wallet on this page');
  const [account] = (await eth.request({ method: 'eth_requestAccounts' })) as string[];
  if (!account) throw new Error('The wallet gave no account');
  const walletChain = Number(await eth.request({ method: 'eth_chainId' }).catch(() => NaN));
  const attempt = async (chainId: number) => {
    const n = await data(api.POST('/v1/auth/nonce'));
    const message = siweMessage({ domain: location.host, origin: location.origin, address: account, statement: 'Sign in to the gateway console.', chainId, nonce: n.nonce, nonceExpiresAt: n.expires_at });
    const signature = (await eth.request({ method: 'personal_sign', params: [messageHex(message), account] })) as string;
    await api.POST('/v1/auth/verify', { body: { message, signature } });
  };
  const first = Number.isSafeInteger(walletChain) && walletChain > 0 ? walletChain : 1;
  try {
    await attempt(first);
  } catch (e) {
    // A gateway that takes other chains than the wallet's: mainnet is the default one.
    if (first !== 1 && e instanceof ApiError && e.type === 'invalid_siwe') await attempt(1);
    else throw e;
  }
}

interface Credential {
  toJSON(): unknown;
}
declare const PublicKeyCredential: { parseRequestOptionsFromJSON(o: unknown): unknown };

/** A passkey sign-in (where the gateway has passkeys). */
export async function passkeySignIn(): Promise<void> {
  const options = await data(api.POST('/v1/auth/passkey/login/options', { body: {} }));
  const credential = (await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) } as CredentialRequestOptions)) as Credential | null;
  if (!credential) throw new Error('No passkey was chosen');
  await api.POST('/v1/auth/passkey/login/verify', { body: { credential: credential.toJSON() } as never });
}

export async function signOut(everywhere: boolean): Promise<void> {
  tabSet('org_session', null);
  await (everywhere ? api.POST('/v1/auth/logout-all') : api.POST('/v1/auth/logout'));
  tabClear();
}

/** Act for an organization: its switched session is a bearer token, kept for this tab. */
export async function switchOrg(orgId: string | null): Promise<void> {
  if (orgId === null) return tabSet('org_session', null);
  tabSet('org_session', null);
  const s = await data(api.POST('/v1/orgs/{id}/switch', { params: { path: { id: orgId } } }));
  tabSet('org_session', (s as { token: string }).token);
}
