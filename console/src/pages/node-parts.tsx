import { useState } from 'preact/hooks';
import type { Res } from '../api.ts';
import { bytes, timeZone, when } from '../format.ts';
import { ConfirmButton, SecretOnce, TextField } from '../ui/actions.tsx';
import { DataTable } from '../ui/table.tsx';

export type OwnerNode = Res<'/v1/nodes/mine', 'get'>[number];
export type Enrolled = Res<'/v1/nodes/enroll', 'post'>;
export type EnrollBody = { name?: string; kinds: Array<'sandbox' | 'inference'>; models?: string[]; model_map?: Record<string, string>; speed_factor?: number };

/** The fields of a node both the owner's and the admin's table show. */
export function NodeTable(props: { nodes: OwnerNode[]; actions: (n: OwnerNode) => preact.ComponentChildren; name: string; extra?: (n: OwnerNode) => preact.ComponentChildren }) {
  return (
    <DataTable name={props.name} columns={['Node', 'Status', 'Kinds and models', 'Load', 'Reliability', 'Latency', 'Last heartbeat', 'Actions']} caption={<>Last heartbeats in {timeZone}</>}>
          {props.nodes.map((n) => {
            const caps = n.capabilities as { cpu?: { cores?: number; load?: number }; memory?: { available_bytes?: number } } | null;
            return (
              <tr key={n.id} data-node={n.id} data-status={n.status}>
                <td>
                  <strong>{n.name ?? n.id}</strong> <code>{n.id}</code>
                  {props.extra?.(n)}
                </td>
                <td>
                  <span class={`status status-${n.status}`}>{n.status.replace('_', ' ')}</span>
                </td>
                <td>
                  {n.kinds.join(', ')}
                  {n.models.length > 0 && <div class="muted">{n.models.join(', ')}</div>}
                </td>
                <td>
                  {n.running_jobs} jobs
                  {caps?.cpu && (
                    <div class="muted">
                      cpu {caps.cpu.load ?? '-'} of {caps.cpu.cores ?? '-'} cores, {bytes(caps.memory?.available_bytes)} free
                    </div>
                  )}
                </td>
                <td>{n.reliability === null ? '-' : `${(n.reliability * 100).toFixed(1)}%`}</td>
                <td>{n.latency_ms === null ? '-' : `${n.latency_ms} ms`}</td>
                <td>{when(n.last_heartbeat_at)}</td>
                <td class="row-actions">{props.actions(n)}</td>
              </tr>
            );
          })}
        </DataTable>
  );
}

/** The enroll form (kinds, and for inference the models, their local names and a speed factor). */
export function EnrollForm(props: { label: string; onEnroll: (body: EnrollBody) => Promise<void> }) {
  const [name, setName] = useState('');
  const [sandbox, setSandbox] = useState(true);
  const [inference, setInference] = useState(false);
  const [models, setModels] = useState('');
  const [speed, setSpeed] = useState('');
  return (
    <form
      class="card"
      aria-label={props.label}
      onSubmit={(e) => {
        e.preventDefault();
        const kinds = [...(sandbox ? ['sandbox' as const] : []), ...(inference ? ['inference' as const] : [])];
        const pairs = models
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean)
          .map((m) => m.split('='));
        const body: EnrollBody = { kinds, ...(name.trim() ? { name: name.trim() } : {}) };
        if (inference && pairs.length) {
          body.models = pairs.map((p) => p[0]!.trim());
          const map = Object.fromEntries(pairs.filter((p) => p[1]).map((p) => [p[0]!.trim(), p[1]!.trim()]));
          if (Object.keys(map).length) body.model_map = map;
        }
        if (inference && speed.trim()) body.speed_factor = Number(speed);
        void props.onEnroll(body);
      }}
    >
      <h2>{props.label}</h2>
      <div class="grid">
        <TextField label="Name" id="n-name" value={name} set={setName} />
        <fieldset>
          <legend>Kinds</legend>
          <label>
            <input type="checkbox" checked={sandbox} onChange={(e) => setSandbox((e.target as HTMLInputElement).checked)} /> sandbox
          </label>
          <label>
            <input type="checkbox" checked={inference} onChange={(e) => setInference((e.target as HTMLInputElement).checked)} /> inference
          </label>
        </fieldset>
        {inference && (
          <>
            <TextField label="Models" id="n-models" value={models} set={setModels} hint="public id, or id=local name; comma-separated" />
            <TextField label="Speed factor (optional)" id="n-speed" value={speed} set={setSpeed} inputMode="decimal" />
          </>
        )}
      </div>
      <button type="submit" class="primary" disabled={!sandbox && !inference}>
        Enroll
      </button>
    </form>
  );
}

/** The node key, once, with the commands that install the agent with it. */
export function NodeKeyOnce(props: { enrolled: Enrolled; onDone: () => void; approval: string }) {
  const origin = location.origin;
  return (
    <SecretOnce
      label={`Node key of ${props.enrolled.node.name ?? props.enrolled.node.id}`}
      secret={props.enrolled.node_key}
      note={
        <>
          <p>On the node host, in a checkout of the gateway after npm ci:</p>
          <pre class="payload" tabIndex={0} aria-label="Install commands">
            {`install -m 600 /dev/stdin node.key    # paste the key, press Enter, then Ctrl-D
sudo installers/node-agent/install.sh --url ${origin} --key-file node.key
rm node.key`}
          </pre>
          <p class="muted">{props.approval}</p>
        </>
      }
      onDone={props.onDone}
    />
  );
}

/** Drain and disable (each asks first) or lift them: the owner's gate route or the admin's, as `gate` calls it. */
export function GateButtons(props: { node: OwnerNode; gate: (id: string, g: 'draining' | 'disabled', set: boolean) => () => Promise<void>; run: (f: () => Promise<unknown>) => Promise<boolean> }) {
  const n = props.node;
  const name = n.name ?? n.id;
  return (
    <>
      {n.draining ? (
        <button type="button" onClick={() => void props.run(props.gate(n.id, 'draining', false))}>
          Stop draining
        </button>
      ) : (
        <ConfirmButton label="Drain" title={`Drain ${name}?`} details={() => <p>It finishes what it runs and takes no new work.</p>} onConfirm={props.gate(n.id, 'draining', true)} />
      )}
      {n.disabled ? (
        <button type="button" onClick={() => void props.run(props.gate(n.id, 'disabled', false))}>
          Enable
        </button>
      ) : (
        <ConfirmButton label="Disable" title={`Disable ${name}?`} details={() => <p>It is taken out of scheduling.</p>} onConfirm={props.gate(n.id, 'disabled', true)} />
      )}
    </>
  );
}
