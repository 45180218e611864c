import { api, data, type Res } from '../api.ts';
import { usd, when } from '../format.ts';
import { ConfirmButton, useOutcome } from '../ui/actions.tsx';
import { ListOf, useLoad } from '../ui/load.tsx';
import { CreateKey } from './key-create.tsx';
import { Ghosts, Mandates } from './mandates.tsx';
import { DataTable } from '../ui/table.tsx';

type Key = Res<'/v1/keys', 'get'>[number];

/** The keys as their delegation tree: each key, then the keys below it, indented. */
function tree(keys: Key[]): Array<{ key: Key; depth: number }> {
  const ids = new Set(keys.map((k) => k.id));
  const children = new Map<string | null, Key[]>();
  for (const k of keys) {
    const p = k.parent_id && ids.has(k.parent_id) ? k.parent_id : null;
    children.set(p, [...(children.get(p) ?? []), k]);
  }
  const out: Array<{ key: Key; depth: number }> = [];
  const walk = (p: string | null, depth: number) => {
    for (const k of children.get(p) ?? []) {
      out.push({ key: k, depth });
      walk(k.id, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

/** The keys a revoke takes with it: the key and every live key below it. */
export function subtree(keys: Key[], id: string): Key[] {
  const out = keys.filter((k) => k.id === id);
  for (let i = 0; i < out.length; i++) out.push(...keys.filter((k) => k.parent_id === out[i]!.id));
  return out.filter((k) => k.status !== 'revoked');
}

export function Keys() {
  const keys = useLoad(() => data(api.GET('/v1/keys')));
  const out = useOutcome();
  return (
    <section>
      <h1>Keys</h1>
      <CreateKey onCreated={keys.reload} />
      <h2>Your keys</h2>
      {out.view}
      <ListOf load={keys} what="your keys" empty="No keys yet: create one above.">
        {(list) => (
          <DataTable name="keys" columns={['Key', 'Status', 'Scopes', 'Spent (subtree)', 'Cap', 'Expires', 'Actions']}>
                {tree(list).map(({ key: k, depth }) => (
                  <tr key={k.id} data-key={k.id} data-status={k.status} data-subtree-spent={k.subtree_spent_micro_usd}>
                    <td class={`depth-${Math.min(depth, 4)}`}>
                      <strong>{k.name ?? '(unnamed)'}</strong> <code>{k.prefix}</code>
                      {k.managed_by && <span class="tag">{k.managed_by}</span>}
                    </td>
                    <td>
                      {k.status}
                      {k.frozen_reason ? ` (${k.frozen_reason})` : ''}
                    </td>
                    <td>{k.scopes.length ? k.scopes.join(', ') : 'all'}</td>
                    <td>
                      {usd(k.spent_micro_usd)} ({usd(k.subtree_spent_micro_usd)})
                    </td>
                    <td>{k.spend_cap_micro_usd === null ? 'none' : usd(k.spend_cap_micro_usd)}</td>
                    <td>{when(k.expires_at)}</td>
                    <td class="row-actions">
                      {k.status === 'frozen' && (
                        <button type="button" onClick={() => void out.run(async () => (await api.POST('/v1/keys/{id}/unfreeze', { params: { path: { id: k.id } } }), keys.reload()), `Unfroze ${k.prefix}`)}>
                          Unfreeze
                        </button>
                      )}
                      {k.status !== 'revoked' && k.status !== 'expired' && !k.managed_by && !k.rotated_to && (
                        <ConfirmButton
                          label="Rotate"
                          title={`Rotate ${k.name ?? k.prefix}?`}
                          danger={false}
                          details={() => <p>A new key with the same scopes is made and its secret shown once; this one keeps working through the grace window, then expires.</p>}
                          onConfirm={async () => {
                            const r = await data(api.POST('/v1/keys/{id}/rotate', { params: { path: { id: k.id } }, body: {} }));
                            keys.reload();
                            out.say(`New key ${r.prefix}: ${r.key} (shown once; copy it now). The old one expires ${when(r.replaces.expires_at)}.`);
                          }}
                        />
                      )}
                      {k.status !== 'revoked' && (
                        <ConfirmButton
                          label="Revoke"
                          title={`Revoke ${k.name ?? k.prefix}?`}
                          details={() => {
                            const gone = subtree(list, k.id);
                            return (
                              <>
                                <p>These keys stop working at once ({gone.length}):</p>
                                <ul data-cascade>
                                  {gone.map((g) => (
                                    <li key={g.id}>
                                      {g.name ?? '(unnamed)'} <code>{g.prefix}</code>
                                    </li>
                                  ))}
                                </ul>
                              </>
                            );
                          }}
                          onConfirm={async () => {
                            const r = await data(api.DELETE('/v1/keys/{id}', { params: { path: { id: k.id } } }));
                            keys.reload();
                            out.say(`Revoked ${r.revoked_ids.length} key(s)`);
                          }}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </DataTable>
        )}
      </ListOf>
      <Mandates keys={keys.state === 'ready' ? keys.data : []} onChange={keys.reload} />
      <Ghosts onChange={keys.reload} />
    </section>
  );
}
