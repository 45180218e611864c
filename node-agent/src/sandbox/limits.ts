import type { Limits } from '@svc/shared';
import { WORKSPACE } from '@svc/shared';

/** Labels that mark containers and volumes as ours; the reaper finds leftovers by them. */
export const LABEL = {
  owner: 'svc.owner',
  kind: 'svc.sandbox.kind', // run | session | pool
  id: 'svc.sandbox.id', // the run's job id or the session id
  instance: 'svc.agent.instance', // one agent process
  pid: 'svc.agent.pid',
} as const;
export const OWNER = 'svc-node';

export const SANDBOX_UID = '1000:1000';
/** /tmp is a tmpfs of this size (its pages count against the container's memory limit). */
export const TMP_BYTES = 64 * 1024 * 1024;
export const SHM_BYTES = 16 * 1024 * 1024;
/**
 * A session container's idle main process; programs run beside it with `docker exec`. It reads the stdin
 * the agent holds attached, so if the agent dies the stream closes and the container stops by itself.
 */
export const IDLE_CMD = ['sh', '-c', 'while read -r _; do :; done'];
/**
 * A run container's main process: waits on stdin for one line of shell (`cd`, `export`s, `exec` argv, all
 * single-quoted, newlines as "$N") and becomes the program; the rest of stdin is the program's. No
 * `docker exec` (a runc exec costs 100+ ms) is needed to start it. See runner.ts. If the agent dies first,
 * stdin closes and the container stops by itself.
 */
export const RUNNER_CMD = ['sh', '-c', "N='\n'; IFS= read -r l || exit 125; eval \"$l\""];

export type BoxKind = 'run' | 'session' | 'pool';

/** The cgroup settings for a job's limits; also what `container.update()` takes for a warm container. */
export function resourceLimits(l: Limits): { Memory: number; MemorySwap: number; NanoCpus: number; PidsLimit: number } {
  const memory = l.memory_mb * 1024 * 1024;
  // MemorySwap equal to Memory: no swap, so the limit is a hard one and overuse ends in the OOM killer.
  return { Memory: memory, MemorySwap: memory, NanoCpus: Math.round(l.cpus * 1e9), PidsLimit: l.pids };
}

/** Limits of a warm container until a run takes it (then `resourceLimits` of the job are applied). */
export const POOL_LIMITS: Limits = { memory_mb: 256, cpus: 1, pids: 64, output_bytes: 1024 * 1024 };

/** The HostConfig every sandbox container gets: no privileges, read-only root, writable workspace volume. */
export function hostConfig(opts: { volume: string; network: boolean; limits: Limits }) {
  return {
    ...resourceLimits(opts.limits),
    NetworkMode: opts.network ? 'bridge' : 'none',
    ReadonlyRootfs: true,
    Mounts: [{ Type: 'volume' as const, Source: opts.volume, Target: WORKSPACE, ReadOnly: false }],
    Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${TMP_BYTES},mode=1777` },
    ShmSize: SHM_BYTES,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    Privileged: false,
    IpcMode: 'private',
    // docker-init as PID 1 reaps orphans, so zombies never eat the pids limit.
    Init: true,
    // Under host memory pressure the kernel picks sandbox processes first.
    OomScoreAdj: 500,
    LogConfig: { Type: 'none', Config: {} },
    RestartPolicy: { Name: '' as const },
  };
}
