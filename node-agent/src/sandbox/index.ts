import { FileListJob, FileReadJob, FileWriteJob, SANDBOX_JOBS, SnapshotCreateJob, SnapshotDeleteJob } from '@svc/shared';
import type { JobHandler } from '../jobs/types.ts';
import { SandboxDocker } from './docker.ts';
import { decodeFile, listWorkspace, readWorkspaceFile, writeFiles } from './files.ts';
import { WarmPool } from './pool.ts';
import { startReaper } from './reaper.ts';
import { runHandler } from './run.ts';
import { Sessions } from './session.ts';
import { Snapshots } from './snapshots.ts';

export const DEFAULT_IMAGE = 'svc-sandbox:latest';
export const DEFAULT_POOL_SIZE = 3;

export interface SandboxOptions {
  /** Default `svc-sandbox:latest` (env `SVC_SANDBOX_IMAGE`). */
  image?: string;
  /** Warm containers kept for one-shot runs with no demand; 0 turns the pool off. Default 3 (env `SVC_SANDBOX_POOL`). */
  poolSize?: number;
  /** The most warm containers kept while runs arrive fast. Default 64, less when memory is short (env `SVC_SANDBOX_POOL_MAX`). */
  poolMax?: number;
  socketPath?: string;
  reapEveryMs?: number;
}

/** The sandbox settings an operator can give the agent in its environment. */
export function sandboxOptionsFromEnv(env: NodeJS.ProcessEnv): SandboxOptions {
  const o: SandboxOptions = {};
  if (env.SVC_SANDBOX_IMAGE) o.image = env.SVC_SANDBOX_IMAGE;
  const n = env.SVC_SANDBOX_POOL !== undefined ? Number(env.SVC_SANDBOX_POOL) : NaN;
  if (Number.isInteger(n) && n >= 0 && n <= 64) o.poolSize = n;
  const max = env.SVC_SANDBOX_POOL_MAX !== undefined ? Number(env.SVC_SANDBOX_POOL_MAX) : NaN;
  if (Number.isInteger(max) && max >= 0 && max <= 256) o.poolMax = max;
  if (env.SVC_DOCKER_SOCKET) o.socketPath = env.SVC_DOCKER_SOCKET;
  return o;
}

export interface Sandbox {
  handlers: Record<string, JobHandler>;
  docker: SandboxDocker;
  pool: WarmPool;
  sessions: Sessions;
  snapshots: Snapshots;
  /** Resolves once the first reaper pass is done. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the sandbox side of an agent: checks that Docker answers (else returns why not, and the agent
 * runs without sandbox jobs), runs the reaper at once and every minute, fills the warm pool, and returns
 * the job handlers for the `sandbox.*` kinds.
 */
export async function startSandbox(opts: SandboxOptions & { dataDir: string; log: (m: string) => void }): Promise<Sandbox | { unavailable: string }> {
  const sd = new SandboxDocker(opts.image ?? DEFAULT_IMAGE, opts.socketPath, opts.log);
  let version: string;
  try {
    version = await sd.version();
  } catch (e) {
    sd.close();
    return { unavailable: `Docker is not reachable at ${sd.socketPath}: ${(e as Error).message}` };
  }
  const snapshots = new Snapshots(opts.dataDir);
  const sessions = new Sessions(sd, snapshots);
  const pool = new WarmPool(sd, opts.poolSize ?? DEFAULT_POOL_SIZE, opts.log, { maxBoxes: opts.poolMax });
  const reaper = startReaper(sd, snapshots, opts.reapEveryMs);
  const image = await sd.imageId().catch(() => null);
  if (image) void reaper.done.then(() => pool.fill());
  opts.log(
    image
      ? `sandbox: Docker ${version}, image ${sd.image} (${image.slice(0, 19)}), warm pool of ${pool.size} to ${pool.ceiling}`
      : `sandbox: Docker ${version}, but the image ${sd.image} is not on this node (build it with installers/sandbox-image/build.sh); sandbox jobs will fail until it is`,
  );

  const withBox = (id: string) => sessions.box(id);
  const handlers: Record<string, JobHandler> = {
    [SANDBOX_JOBS.run]: runHandler(sd, pool),
    [SANDBOX_JOBS.sessionCreate]: async (p) => ({ result: await sessions.create(p) }),
    [SANDBOX_JOBS.sessionExec]: async (p, ctx) => ({ result: await sessions.exec(p, ctx) }),
    [SANDBOX_JOBS.sessionStop]: async (p) => ({ result: await sessions.stop(p) }),
    [SANDBOX_JOBS.sessionTerminal]: async (p, ctx) => ({ result: await sessions.terminal(p, ctx) }),
    [SANDBOX_JOBS.fileWrite]: async (p) => {
      const job = FileWriteJob.parse(p);
      const file = decodeFile(job.path, job.content_b64);
      await writeFiles(withBox(job.session_id), [file]);
      return { result: { path: `/workspace/${file.rel}`, bytes: file.content.length } };
    },
    [SANDBOX_JOBS.fileRead]: async (p) => {
      const job = FileReadJob.parse(p);
      const content = await readWorkspaceFile(withBox(job.session_id), job.path);
      return { result: { content_b64: content.toString('base64'), bytes: content.length } };
    },
    [SANDBOX_JOBS.fileList]: async (p) => {
      const job = FileListJob.parse(p);
      return { result: await listWorkspace(withBox(job.session_id), job.path) };
    },
    [SANDBOX_JOBS.snapshotCreate]: async (p) => {
      const job = SnapshotCreateJob.parse(p);
      return { result: await snapshots.create(withBox(job.session_id), job.snapshot_id) };
    },
    [SANDBOX_JOBS.snapshotDelete]: async (p) => ({ result: await snapshots.delete(SnapshotDeleteJob.parse(p).snapshot_id) }),
  };

  return {
    handlers,
    docker: sd,
    pool,
    sessions,
    snapshots,
    ready: reaper.done,
    async stop() {
      reaper.stop();
      await Promise.all([pool.close(), sessions.stopAll()]);
      sd.close();
    },
  };
}
