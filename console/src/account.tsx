import { useEffect, useState } from 'preact/hooks';
import { api, data, type Res } from './api.ts';
import type { Me } from './app.tsx';
import { navigate } from './router.tsx';
import { signOut, switchOrg } from './session.ts';
import { tabGet } from './tab.ts';
import { ConfirmButton } from './ui/actions.tsx';

type Org = Res<'/v1/orgs', 'get'>[number];

/** Who is signed in, the organization the tab acts for (members of orgs switch here), and signing out. */
export function AccountMenu(props: { me: Me; onChange: () => void }) {
  const [orgs, setOrgs] = useState<Org[] | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const acting = tabGet('org_session');
  useEffect(() => {
    // The roster of orgs is the member's own: read with the personal session.
    if (acting) return;
    data(api.GET('/v1/orgs')).then(setOrgs, () => setOrgs([]));
  }, [acting]);
  const change = async (id: string) => {
    setErr(null);
    try {
      await switchOrg(id === '' ? null : id);
      props.onChange();
      navigate('/');
    } catch (e) {
      setErr((e as Error).message);
    }
  };
  const out = async (everywhere: boolean) => {
    await signOut(everywhere);
    props.onChange();
    navigate('/');
  };
  return (
    <div class="account">
      <span class="who" title={props.me.account_id}>
        {props.me.wallet_address ? `${props.me.wallet_address.slice(0, 6)}…${props.me.wallet_address.slice(-4)}` : props.me.account_id}
      </span>
      {acting ? (
        <button type="button" onClick={() => void change('')}>
          Back to my account
        </button>
      ) : (
        orgs &&
        orgs.length > 0 && (
          <>
            <label for="org-switch" class="visually-hidden">
              Act for
            </label>
            <select id="org-switch" value="" onChange={(e) => void change((e.target as HTMLSelectElement).value)}>
              <option value="">My account</option>
              {orgs.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name} ({o.role})
                </option>
              ))}
            </select>
          </>
        )
      )}
      <button type="button" onClick={() => void out(false)}>
        Sign out
      </button>
      <ConfirmButton label="Sign out everywhere" title="Sign out everywhere?" details={() => <p>Every session of this account ends: other browsers, the CLI and scripts using a session token.</p>} onConfirm={() => out(true)} />
      {err && (
        <span class="error" role="alert">
          {err}
        </span>
      )}
    </div>
  );
}
