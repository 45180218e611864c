import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../api.ts';
import { onTabChange, tabGet, tabSet } from '../tab.ts';
import { Field, useOutcome } from './actions.tsx';

/** The tab's API key, and whether one is set (it changes when one is entered or forgotten). */
export function useTabKey(): string | null {
  const [k, setK] = useState(tabGet('api_key'));
  useEffect(() => onTabChange(() => setK(tabGet('api_key'))), []);
  return k;
}

/**
 * Routes that take an API key (sandboxes, payment requests) are called with a key kept for this tab only: one
 * pasted here, or a new key the console makes for it (its secret never leaves this tab's storage). The
 * children render once a key is set.
 */
export function WithTabKey(props: { scopes: string[]; why: string; children: ComponentChildren }) {
  const key = useTabKey();
  const [pasted, setPasted] = useState('');
  const out = useOutcome();
  if (key)
    return (
      <>
        <p class="muted tab-key">
          Using the API key <code>{key.slice(0, 14)}…</code> for this tab.{' '}
          <button type="button" onClick={() => tabSet('api_key', null)}>
            Forget it
          </button>
        </p>
        {props.children}
      </>
    );
  return (
    <div class="card" aria-label="An API key for this tab">
      <p>{props.why} The key is kept for this tab only, and forgotten when it closes.</p>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          if (!pasted.trim().startsWith('sk-svc_')) return out.say('An API key starts with sk-svc_', true);
          tabSet('api_key', pasted.trim());
        }}
      >
        <Field label="API key" id="tab-key">
          <input id="tab-key" type="password" autoComplete="off" value={pasted} onInput={(e) => setPasted((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit">Use this key</button>
      </form>
      <button
        type="button"
        class="primary"
        onClick={() =>
          void out.run(async () => {
            const k = await data(api.POST('/v1/keys', { body: { name: 'console tab', scopes: props.scopes as never } }));
            tabSet('api_key', k.key);
          })
        }
      >
        Create a key for this tab ({props.scopes.join(', ')})
      </button>
      {out.view}
    </div>
  );
}
