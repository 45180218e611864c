import { lazy, Suspense } from 'preact/compat';
import { useState } from 'preact/hooks';
import { data, keyApi, type Res } from '../api.ts';
import { bytes, seconds, usd, when } from '../format.ts';
import { ConfirmButton, useOutcome } from '../ui/actions.tsx';
import { ListOf, Loading, useLoad } from '../ui/load.tsx';
import { useTabKey, WithTabKey } from '../ui/tab-key.tsx';
import { Files } from './files.tsx';
import { DataTable } from '../ui/table.tsx';

const TerminalPanel = lazy(() => import('./terminal.tsx').then((m) => m.TerminalPanel));
type Session = Res<'/v1/sandboxes/sessions', 'get'>[number];

/** Sandbox sessions (status, cost, alive time), a terminal in the browser, workspace files, snapshots. */
export function Sandboxes() {
  return (
    <section>
      <h1>Sandboxes</h1>
      <WithTabKey scopes={['sandboxes', 'billing']} why="Sandbox sessions are reached with an API key (the sandboxes scope).">
        <SessionsView />
      </WithTabKey>
    </section>
  );
}

function SessionsView() {
  const key = useTabKey()!;
  const sessions = useLoad(() => data(keyApi.GET('/v1/sandboxes/sessions')), [key]);
  const snapshots = useLoad(() => data(keyApi.GET('/v1/sandboxes/snapshots')), [key]);
  const [terminal, setTerminal] = useState<string | null>(null);
  const [files, setFiles] = useState<string | null>(null);
  const out = useOutcome();
  const live = (s: Session) => s.status === 'running' || s.status === 'starting';
  return (
    <>
      <div class="actions">
        <button type="button" class="primary" onClick={() => void out.run(async () => (await keyApi.POST('/v1/sandboxes/sessions', { body: {} }), sessions.reload()), 'Session opened')}>
          Open a session
        </button>
        <button type="button" onClick={sessions.reload}>
          Refresh
        </button>
      </div>
      {out.view}
      {terminal && (
        <Suspense fallback={<Loading what="the terminal" />}>
          <TerminalPanel
            sessionId={terminal}
            apiKey={key}
            onClose={() => {
              setTerminal(null);
              sessions.reload();
            }}
          />
        </Suspense>
      )}
      {files && <Files sessionId={files} onClose={() => setFiles(null)} />}
      <h2>Sessions</h2>
      <ListOf load={sessions} what="sandbox sessions" empty="No sessions yet: open one.">
        {(list) => (
          <DataTable name="sessions" columns={['Session', 'Status', 'Alive', 'Execs', 'Cost', 'Started', 'Actions']} times>
                {list.map((s) => (
                  <tr key={s.id} data-session={s.id} data-status={s.status} data-cost={s.cost_micro_usd}>
                    <td>
                      <code>{s.id}</code>
                    </td>
                    <td>{s.status}</td>
                    <td>{seconds(s.alive_seconds)}</td>
                    <td>{s.exec_count}</td>
                    <td>{usd(s.cost_micro_usd)}</td>
                    <td>{when(s.created_at)}</td>
                    <td class="row-actions">
                      {live(s) && (
                        <>
                          <button type="button" onClick={() => setTerminal(s.id)}>
                            Terminal
                          </button>
                          <button type="button" onClick={() => setFiles(s.id)}>
                            Files
                          </button>
                          <button type="button" onClick={() => void out.run(async () => (await keyApi.POST('/v1/sandboxes/sessions/{id}/snapshot', { params: { path: { id: s.id } }, body: {} as never }), snapshots.reload()), 'Snapshot taken')}>
                            Snapshot
                          </button>
                          <ConfirmButton
                            label="Stop"
                            title="Stop this session?"
                            details={() => <p>Its container and workspace go away (snapshots stay). Open terminals close.</p>}
                            onConfirm={async () => {
                              await keyApi.DELETE('/v1/sandboxes/sessions/{id}', { params: { path: { id: s.id } } });
                              if (terminal === s.id) setTerminal(null);
                              sessions.reload();
                            }}
                          />
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </DataTable>
        )}
      </ListOf>
      <h2>Snapshots</h2>
      <ListOf load={snapshots} what="snapshots" empty="No snapshots.">
        {(list) => (
          <ul class="rows" data-list="snapshots">
            {list.map((p) => (
              <li key={p.id}>
                <code>{p.id}</code> of <code>{p.session_id}</code>, {bytes(p.bytes)}, {when(p.created_at)}
                <ConfirmButton
                  label="Delete"
                  title="Delete this snapshot?"
                  details={() => <p>Its archive is removed from its node.</p>}
                  onConfirm={async () => {
                    await keyApi.DELETE('/v1/sandboxes/snapshots/{id}', { params: { path: { id: p.id } } });
                    snapshots.reload();
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
