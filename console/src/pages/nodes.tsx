import { useState } from 'preact/hooks';
import { api, data } from '../api.ts';
import { useOutcome } from '../ui/actions.tsx';
import { ListOf, useLoad } from '../ui/load.tsx';
import { EnrollForm, GateButtons, NodeKeyOnce, NodeTable, type Enrolled } from './node-parts.tsx';

/** The operator's own nodes: online or offline by the last heartbeat, load, reliability, latency; enroll, drain, disable. */
export function Nodes() {
  const nodes = useLoad(() => data(api.GET('/v1/nodes/mine')));
  const [enrolled, setEnrolled] = useState<Enrolled | null>(null);
  const out = useOutcome();
  const gate = (id: string, g: 'draining' | 'disabled', set: boolean) => async () => {
    await api.POST('/v1/nodes/{id}/{gate}', { params: { path: { id, gate: g } }, body: { set } });
    nodes.reload();
  };
  return (
    <section>
      <h1>Nodes</h1>
      {enrolled ? (
        <NodeKeyOnce enrolled={enrolled} approval="An admin approves the node before it takes work." onDone={() => setEnrolled(null)} />
      ) : (
        <EnrollForm
          label="Enroll a node"
          onEnroll={(body) =>
            out.run(async () => {
              setEnrolled(await data(api.POST('/v1/nodes/enroll', { body })));
              nodes.reload();
            }) as Promise<never>
          }
        />
      )}
      {out.view}
      <h2>Your nodes</h2>
      <div class="actions">
        <button type="button" onClick={nodes.reload}>
          Refresh
        </button>
      </div>
      <ListOf load={nodes} what="your nodes" empty="No nodes yet: enroll one above.">
        {(list) => (
          <NodeTable
            name="nodes"
            nodes={list}
            actions={(n) => (
              <>
                <GateButtons node={n} gate={gate} run={out.run} />
              </>
            )}
          />
        )}
      </ListOf>
    </section>
  );
}
