import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { SandboxDocker } from './docker.ts';
import { ignoreGone } from './errors.ts';
import { LABEL, OWNER } from './limits.ts';
import type { Snapshots } from './snapshots.ts';

export const REAP_EVERY_MS = 60_000;

/** Whether the agent process that labelled a container is still alive on this host. */
function agentAlive(pidLabel: string | undefined): boolean {
  const pid = Number(pidLabel);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !zombie(pid);
}

/** A killed process its parent has not waited for yet still takes signals: it is gone all the same. */
function zombie(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false; // no /proc to tell: alive, as the signal said
  }
}

/**
 * Removes sandbox containers and volumes (labelled `svc.owner=svc-node`) that no live run, session or
 * warm pool owns: this agent's ones that are not in its live set, and those of an agent process that is
 * gone (a crash, a SIGKILL). Another live agent's boxes on the same engine are left alone. Also removes
 * temp files of interrupted snapshots; snapshots themselves belong to the control plane and stay.
 */
export async function reap(sd: SandboxDocker, snapshots?: Snapshots): Promise<{ containers: number; volumes: number; temps: number }> {
  const orphan = (labels: Record<string, string> | undefined, name: string) => {
    if (!labels || labels[LABEL.owner] !== OWNER) return false;
    if (labels[LABEL.instance] === sd.instance) return !sd.live.has(name);
    return !agentAlive(labels[LABEL.pid]);
  };
  const filters = { label: [`${LABEL.owner}=${OWNER}`] };
  let containers = 0;
  for (const c of await sd.docker.listContainers({ all: true, filters })) {
    const name = (c.Names[0] ?? '').replace(/^\//, '');
    if (!orphan(c.Labels, name)) continue;
    await ignoreGone(sd.docker.getContainer(c.Id).remove({ force: true, v: true }));
    containers++;
  }
  let volumes = 0;
  const { Volumes } = await sd.docker.listVolumes({ filters });
  for (const v of Volumes ?? []) {
    if (!orphan(v.Labels ?? undefined, v.Name)) continue;
    try {
      await sd.docker.getVolume(v.Name).remove({ force: true });
      volumes++;
    } catch {
      /* still in use by a container being removed: next round */
    }
  }
  const temps = snapshots ? await snapshots.sweepTemps() : 0;
  return { containers, volumes, temps };
}

/** Reaps now and every minute until stopped. */
export function startReaper(sd: SandboxDocker, snapshots: Snapshots, everyMs = REAP_EVERY_MS): { stop(): void; done: Promise<void> } {
  const once = () =>
    reap(sd, snapshots).then(
      (r) => {
        if (r.containers + r.volumes + r.temps > 0) sd.log(`sandbox reaper on ${hostname()}: removed ${r.containers} containers, ${r.volumes} volumes, ${r.temps} temp files`);
      },
      (e: unknown) => sd.log(`sandbox reaper failed: ${(e as Error).message}`),
    );
  const done = once();
  const timer = setInterval(() => void once(), everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer), done };
}
