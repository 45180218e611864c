import { useEffect, useState } from 'preact/hooks';
import { adminApi, api, data } from '../api.ts';
import { bytes, seconds, when } from '../format.ts';
import { onTabChange, tabGet, tabSet } from '../tab.ts';
import { ConfirmButton, Field, useOutcome } from '../ui/actions.tsx';
import { ListOf, Loaded, useLoad } from '../ui/load.tsx';
import { EnrollForm, GateButtons, NodeKeyOnce, NodeTable, type Enrolled } from './node-parts.tsx';

interface Fleet {
  nodes: number;
  by_status: Record<string, number>;
  online_by_kind: Record<string, number>;
  running_jobs: number;
  sandbox_capacity: { nodes: number; cpu_cores: number; memory_total_bytes: number; memory_available_bytes: number };
}

/** The admin page, with the admin token entered here and kept for this tab only. */
export function Admin() {
  const [token, setToken] = useState(tabGet('admin_token'));
  const [typed, setTyped] = useState('');
  useEffect(() => onTabChange(() => setToken(tabGet('admin_token'))), []);
  if (!token)
    return (
      <section>
        <h1>Admin</h1>
        <form
          class="card"
          aria-label="Admin token"
          onSubmit={(e) => {
            e.preventDefault();
            if (typed.trim()) tabSet('admin_token', typed.trim());
          }}
        >
          <p>The admin routes take the gateway's admin token. It is kept for this tab only and sent only to this gateway.</p>
          <Field label="Admin token" id="admin-token">
            <input id="admin-token" type="password" autoComplete="off" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} />
          </Field>
          <button type="submit" class="primary">
            Continue
          </button>
        </form>
      </section>
    );
  return <AdminPages />;
}

function AdminPages() {
  const nodes = useLoad(() => data(adminApi.GET('/v1/admin/nodes')));
  const metrics = useLoad(() => data(adminApi.GET('/v1/admin/metrics')));
  const status = useLoad(() => data(api.GET('/v1/status')));
  const [enrolled, setEnrolled] = useState<Enrolled | null>(null);
  const out = useOutcome();
  const reload = () => {
    nodes.reload();
    metrics.reload();
  };
  const gate = (node_id: string, g: 'draining' | 'disabled', set: boolean) => async () => {
    await adminApi.POST('/v1/admin/nodes/gate', { body: { node_id, gate: g, set } });
    reload();
  };
  const approve = (node_id: string, approved: boolean) => async () => {
    await adminApi.POST('/v1/admin/nodes/approve', { body: { node_id, approved } });
    reload();
  };
  return (
    <section>
      <h1>Admin</h1>
      <div class="actions">
        <span class="muted">Using the admin token for this tab.</span>
        <button type="button" onClick={() => tabSet('admin_token', null)}>
          Forget it
        </button>
        <button
          type="button"
          onClick={() => {
            reload();
            status.reload();
          }}
        >
          Refresh
        </button>
      </div>
      <h2>Gateway</h2>
      <Loaded load={status} what="the gateway's health">
        {(s) => (
          <dl class="figures-row" data-figures="status">
            <div>
              <dt>Health</dt>
              <dd data-figure="health">{s.status}</dd>
            </div>
            <div>
              <dt>Process uptime</dt>
              <dd data-figure="uptime">{seconds(s.process.uptime_seconds)}</dd>
            </div>
            <div>
              <dt>Database</dt>
              <dd>
                {s.database.ok ? 'ok' : 'failing'}, {s.database.latency_ms} ms
              </dd>
            </div>
            {Object.entries(s.uptime).map(([window, u]) => (
              <div key={window}>
                <dt>Uptime {window}</dt>
                <dd data-figure={`uptime-${window}`}>
                  {u.uptime_ratio === null ? 'no samples yet' : `${(u.uptime_ratio * 100).toFixed(2)}%`} <span class="muted">({u.samples_healthy} of {u.samples_expected} samples)</span>
                </dd>
              </div>
            ))}
          </dl>
        )}
      </Loaded>
      <h2>Fleet</h2>
      <Loaded load={metrics} what="the fleet summary">
        {(m) => {
          const f = (m as { fleet?: Fleet }).fleet;
          if (!f) return <p class="muted">This gateway reports no fleet summary.</p>;
          return (
            <dl class="figures-row" data-figures="fleet">
              <div>
                <dt>Nodes</dt>
                <dd data-figure="nodes">{f.nodes}</dd>
              </div>
              {Object.entries(f.online_by_kind).map(([kind, n]) => (
                <div key={kind}>
                  <dt>Online {kind}</dt>
                  <dd data-figure={`online-${kind}`}>{n}</dd>
                </div>
              ))}
              <div>
                <dt>Running jobs</dt>
                <dd data-figure="running-jobs">{f.running_jobs}</dd>
              </div>
              <div>
                <dt>Sandbox capacity</dt>
                <dd data-figure="sandbox-capacity">
                  {f.sandbox_capacity.nodes} nodes, {f.sandbox_capacity.cpu_cores} cores, {bytes(f.sandbox_capacity.memory_available_bytes)} free
                </dd>
              </div>
            </dl>
          );
        }}
      </Loaded>
      {out.view}
      <h2>Every node</h2>
      <ListOf load={nodes} what="the nodes" empty="No node is enrolled on this gateway.">
        {(list) => (
          <NodeTable
            name="admin-nodes"
            nodes={list}
            extra={(n) => (
              <div class="muted">
                {n.approved ? 'approved' : 'not approved'}
                {n.house ? ', house node' : ''}
                {n.draining ? ', draining' : ''}
                {n.disabled ? ', disabled' : ''}
              </div>
            )}
            actions={(n) => (
              <>
                {n.approved ? (
                  <ConfirmButton label="Withdraw approval" title={`Withdraw the approval of ${n.name ?? n.id}?`} details={() => <p>It takes no new work until approved again.</p>} onConfirm={approve(n.id, false)} />
                ) : (
                  <button type="button" onClick={() => void out.run(approve(n.id, true), `Approved ${n.name ?? n.id}`)}>
                    Approve
                  </button>
                )}
                <GateButtons node={n} gate={gate} run={out.run} />
              </>
            )}
          />
        )}
      </ListOf>
      {enrolled ? (
        <NodeKeyOnce enrolled={enrolled} approval="A house node runs under the house-ops account; approve it above." onDone={() => setEnrolled(null)} />
      ) : (
        <EnrollForm
          label="Enroll a house node"
          onEnroll={(body) =>
            out.run(async () => {
              setEnrolled(await data(adminApi.POST('/v1/admin/nodes/enroll', { body })));
              reload();
            }) as Promise<never>
          }
        />
      )}
      <p class="muted">Metrics generated {when((metrics.state === 'ready' ? (metrics.data as { generated_at?: string }).generated_at : null) ?? null)}</p>
    </section>
  );
}
