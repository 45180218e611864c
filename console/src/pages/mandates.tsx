import { useState } from 'preact/hooks';
import { api, data, type Res } from '../api.ts';
import { localToIso, parseUsd, seconds, usd, when } from '../format.ts';
import { ConfirmButton, Field, SecretOnce, useOutcome, TextField } from '../ui/actions.tsx';
import { ListOf, mapLoad, useLoad } from '../ui/load.tsx';
import { ScopePicker, splitList } from './key-create.tsx';

type Key = Res<'/v1/keys', 'get'>[number];

/** Mandates: signed, bounded spending grants, each with its own key (allowed models and routes live here). */
export function Mandates(props: { keys: Key[]; onChange: () => void }) {
  const list = useLoad(() => data(api.GET('/v1/mandates')));
  const mandates = mapLoad(list, (l) => l.mandates);
  const [parent, setParent] = useState('');
  const [purpose, setPurpose] = useState('');
  const [cap, setCap] = useState('');
  const [expires, setExpires] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [models, setModels] = useState('');
  const [routes, setRoutes] = useState('');
  const [secret, setSecret] = useState<string | null>(null);
  const out = useOutcome();
  const parents = props.keys.filter((k) => k.status === 'active' && !k.managed_by);
  const submit = async (e: Event) => {
    e.preventDefault();
    const capMicro = parseUsd(cap);
    if (capMicro === null) return out.say('Spend cap: an amount in dollars', true);
    const iso = localToIso(expires);
    if (!iso) return out.say('Expires: pick a date and time', true);
    const m = splitList(models);
    const r = splitList(routes);
    await out.run(async () => {
      const made = await data(
        api.POST('/v1/mandates', {
          body: { parent_key_id: parent || parents[0]?.id || '', purpose, spend_cap_micro_usd: capMicro, expires_at: iso, ...(scopes.length ? { scopes: scopes as never } : {}), ...(m.length ? { allowed_models: m } : {}), ...(r.length ? { allowed_routes: r } : {}) },
        }),
      );
      setSecret((made as { key: string }).key);
      list.reload();
      props.onChange();
    });
  };
  return (
    <>
      <h2>Mandates</h2>
      {secret ? (
        <SecretOnce label="The mandate's key" secret={secret} onDone={() => setSecret(null)} />
      ) : (
        <form class="card" onSubmit={(e) => void submit(e)} aria-label="Create a mandate">
          <div class="grid">
            <Field label="Parent key" id="m-parent">
              <select id="m-parent" value={parent || parents[0]?.id} onChange={(e) => setParent((e.target as HTMLSelectElement).value)}>
                {parents.map((k) => (
                  <option key={k.id} value={k.id}>
                    {k.name ?? k.prefix}
                  </option>
                ))}
              </select>
            </Field>
            <TextField label="Purpose" id="m-purpose" value={purpose} set={setPurpose} required />
            <TextField label="Spend cap (USD)" id="m-cap" value={cap} set={setCap} required inputMode="decimal" />
            <TextField label="Expires (your time zone)" id="m-expires" value={expires} set={setExpires} type="datetime-local" required />
            <TextField label="Allowed models (optional)" id="m-models" value={models} set={setModels} hint="comma-separated" />
            <TextField label="Allowed routes (optional)" id="m-routes" value={routes} set={setRoutes} hint='e.g. "POST /v1/chat/completions" or /v1/sandboxes/*' />
          </div>
          <ScopePicker idPrefix="m-scope" value={scopes} onChange={setScopes} />
          <button type="submit" disabled={parents.length === 0}>
            Create mandate
          </button>
          {parents.length === 0 && <p class="muted">A mandate is delegated below one of your active keys: create a key first.</p>}
          {out.view}
        </form>
      )}
      <ListOf load={mandates} what="mandates" empty="No mandates.">
        {(ms) => (
          <ul class="rows" data-list="mandates">
            {ms.map((m) => (
              <li key={m.id}>
                <strong>{m.purpose}</strong> <span class="tag">{m.status}</span> {usd(m.spent_micro_usd)} of {usd(m.spend_cap_micro_usd)}, until {when(m.expires_at)}
                {m.allowed_models && <span class="muted"> models: {m.allowed_models.join(', ')}</span>}
                {m.allowed_routes && <span class="muted"> routes: {m.allowed_routes.join(', ')}</span>}
                {m.status !== 'revoked' && (
                  <ConfirmButton
                    label="Revoke"
                    title="Revoke this mandate?"
                    details={() => <p>Its key and every key below it stop working at once.</p>}
                    onConfirm={async () => {
                      await api.DELETE('/v1/mandates/{id}', { params: { path: { id: m.id } } });
                      list.reload();
                      props.onChange();
                    }}
                  />
                )}
              </li>
            ))}
          </ul>
        )}
      </ListOf>
    </>
  );
}

/** Ghost sessions: ephemeral scoped keys that live at most 24 hours. */
export function Ghosts(props: { onChange: () => void }) {
  const list = useLoad(() => data(api.GET('/v1/ghost/sessions')));
  const ghosts = mapLoad(list, (l) => l.sessions);
  const [name, setName] = useState('');
  const [ttl, setTtl] = useState('3600');
  const [secret, setSecret] = useState<string | null>(null);
  const out = useOutcome();
  return (
    <>
      <h2>Ghost sessions</h2>
      {secret ? (
        <SecretOnce label="The ghost key" secret={secret} onDone={() => setSecret(null)} />
      ) : (
        <form
          class="inline"
          aria-label="Start a ghost session"
          onSubmit={(e) => {
            e.preventDefault();
            void out.run(async () => {
              const g = await data(api.POST('/v1/ghost/sessions', { body: { ...(name.trim() ? { name: name.trim() } : {}), ttl_seconds: Number(ttl) } }));
              setSecret(g.key);
              list.reload();
              props.onChange();
            });
          }}
        >
          <label for="g-name">Name</label>
          <input id="g-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <label for="g-ttl">Lifetime (seconds)</label>
          <input id="g-ttl" inputMode="numeric" value={ttl} onInput={(e) => setTtl((e.target as HTMLInputElement).value)} />
          <button type="submit">Start ghost</button>
        </form>
      )}
      {out.view}
      <ListOf load={ghosts} what="ghost sessions" empty="No ghost sessions.">
        {(gs) => (
          <ul class="rows" data-list="ghosts">
            {gs.map((g) => (
              <li key={g.id}>
                <strong>{g.name ?? g.id}</strong> <span class="tag">{g.status}</span> {seconds(g.seconds_remaining)} left, spent {usd(g.spent_micro_usd)}
                {g.status === 'active' && (
                  <button type="button" onClick={() => void out.run(async () => (await api.POST('/v1/ghost/sessions/{id}/extend', { params: { path: { id: g.id } }, body: { seconds: 3600 } }), list.reload()), 'Extended by an hour')}>
                    Extend 1 h
                  </button>
                )}
                <ConfirmButton
                  label="Destroy"
                  title="Destroy this ghost?"
                  details={() => <p>Its key is revoked and its metadata purged.</p>}
                  onConfirm={async () => {
                    await api.POST('/v1/ghost/sessions/{id}/destroy', { params: { path: { id: g.id } } });
                    list.reload();
                  }}
                />
              </li>
            ))}
          </ul>
        )}
      </ListOf>
    </>
  );
}
