import { useState } from 'preact/hooks';
import { api, data } from '../api.ts';
import { hasWallet, passkeySignIn, walletSignIn } from '../session.ts';
import { useLoad } from '../ui/load.tsx';

/** Sign in with a browser wallet (SIWE), or with a passkey where the gateway has them. */
export function SignIn(props: { onSignedIn: () => void }) {
  const caps = useLoad(() => data(api.GET('/v1/auth/capabilities')));
  const [busy, setBusy] = useState(false);
  const [msg, setMsg] = useState<string | null>(null);
  const go = (how: () => Promise<void>) => async () => {
    setBusy(true);
    setMsg(null);
    try {
      await how();
      props.onSignedIn();
    } catch (e) {
      setMsg(`Sign-in failed: ${(e as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const wallet = hasWallet();
  const passkey = caps.state === 'ready' && caps.data.passkey;
  return (
    <section class="signin">
      <h1>Sign in</h1>
      <p>Sign in to see your credit, keys, usage and receipts. A new wallet gets a new account.</p>
      <div class="actions">
        <button type="button" class="primary" disabled={busy || !wallet} onClick={go(walletSignIn)}>
          Sign in with a wallet
        </button>
        {passkey && (
          <button type="button" disabled={busy} onClick={go(passkeySignIn)}>
            Sign in with a passkey
          </button>
        )}
      </div>
      {!wallet && <p class="muted">No browser wallet was found on this page: install or unlock one (an EIP-1193 provider), then reload.</p>}
      {msg && (
        <p class="error" role="alert">
          {msg}
        </p>
      )}
    </section>
  );
}
