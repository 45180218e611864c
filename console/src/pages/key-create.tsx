import { useState } from 'preact/hooks';
import { SCOPES } from '../../../shared/src/scopes.ts';
import { api, data, type Res } from '../api.ts';
import { localToIso, parseUsd } from '../format.ts';
import { SecretOnce, useOutcome, TextField } from '../ui/actions.tsx';

type NewKey = Res<'/v1/keys', 'post'>;
export const SCOPE_LIST = Object.entries(SCOPES) as Array<[string, string]>;
export const splitList = (s: string) =>
  s
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

/** Scope checkboxes: none ticked means every scope. */
export function ScopePicker(props: { idPrefix: string; value: string[]; onChange: (v: string[]) => void }) {
  return (
    <fieldset class="scopes">
      <legend>Scopes (none ticked: every scope)</legend>
      {SCOPE_LIST.map(([s, what]) => (
        <label key={s} title={what}>
          <input
            type="checkbox"
            id={`${props.idPrefix}-${s}`}
            checked={props.value.includes(s)}
            onChange={(e) => props.onChange((e.target as HTMLInputElement).checked ? [...props.value, s] : props.value.filter((x) => x !== s))}
          />{' '}
          {s}
        </label>
      ))}
    </fieldset>
  );
}

/** Create an API key: name, scopes, spend cap, expiry, and a policy (allowed models, output bound, guardrails). */
export function CreateKey(props: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [cap, setCap] = useState('');
  const [expires, setExpires] = useState('');
  const [models, setModels] = useState('');
  const [maxOut, setMaxOut] = useState('');
  const [guardrails, setGuardrails] = useState('');
  const [made, setMade] = useState<NewKey | null>(null);
  const out = useOutcome();

  const submit = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {};
    if (name.trim()) body.name = name.trim();
    if (scopes.length) body.scopes = scopes;
    if (cap.trim()) {
      const v = parseUsd(cap);
      if (v === null) return out.say('Spend cap: an amount in dollars, e.g. 10 or 0.5', true);
      body.spend_cap_micro_usd = v;
    }
    if (expires) body.expires_at = localToIso(expires);
    const m = splitList(models);
    const g = splitList(guardrails);
    if (m.length || g.length || maxOut.trim()) body.policy = { guardrails: g, ...(m.length ? { models: m } : {}), ...(maxOut.trim() ? { max_output_tokens: Number(maxOut) } : {}) };
    await out.run(async () => {
      setMade(await data(api.POST('/v1/keys', { body: body as never })));
      props.onCreated();
    });
  };

  if (made)
    return (
      <SecretOnce
        label={`New key ${made.name ?? made.prefix}`}
        secret={made.key}
        note={<p class="muted">Use it as <code>Authorization: Bearer …</code> against this gateway.</p>}
        onDone={() => {
          setMade(null);
          setName('');
        }}
      />
    );
  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-label="Create a key">
      <h2>Create a key</h2>
      <div class="grid">
        <TextField label="Name" id="key-name" value={name} set={setName} maxLength={100} />
        <TextField label="Spend cap (USD, optional)" id="key-cap" value={cap} set={setCap} inputMode="decimal" />
        <TextField label="Expires (optional, your time zone)" id="key-expires" value={expires} set={setExpires} type="datetime-local" />
        <TextField label="Allowed models (optional)" id="key-models" value={models} set={setModels} hint="ids or prefixes ending in *, comma-separated" />
        <TextField label="Max output tokens (optional)" id="key-max-out" value={maxOut} set={setMaxOut} inputMode="numeric" />
        <TextField label="Guardrail rule sets (optional)" id="key-guardrails" value={guardrails} set={setGuardrails} hint="ids, comma-separated" />
      </div>
      <ScopePicker idPrefix="key-scope" value={scopes} onChange={setScopes} />
      <p class="muted">Allowed routes are set on a mandate's key (below).</p>
      <button type="submit" class="primary">
        Create key
      </button>
      {out.view}
    </form>
  );
}
