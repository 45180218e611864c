import { randomBytes, randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import Docker from 'dockerode';
import type { Limits } from '@svc/shared';
import { WORKSPACE } from '@svc/shared';
import { dockerStatus, ignoreGone } from './errors.ts';
import { hostConfig, IDLE_CMD, LABEL, OWNER, RUNNER_CMD, SANDBOX_UID, type BoxKind } from './limits.ts';
import { OomWatch } from './oom.ts';

/** One sandbox container with its workspace volume. */
export interface Box {
  name: string;
  id: string;
  volume: string;
  kind: BoxKind;
  /** The run's job id or the session id. */
  owner: string;
  container: Docker.Container;
  /** The image the container runs, `sha256:...` (a `docker import`ed image has no registry digest). */
  imageId: string;
  /** PID of the container's init on this host (0 if unknown). */
  initPid: number;
  network: boolean;
  mode: BoxSpec['mode'];
  /** The container's stdio, attached before it started: the runner's program line and streams. */
  stdio: Duplex;
  /** The cgroup limits the container has now. */
  limits: Limits;
}

export interface BoxSpec {
  kind: BoxKind;
  /** `runner`: the main process waits for one program on stdin (runs); `idle`: programs run by exec (sessions). */
  mode: 'runner' | 'idle';
  owner: string;
  network: boolean;
  limits: Limits;
  env?: string[];
}

/**
 * The Docker engine as the sandbox sees it: creates and destroys boxes (a container plus its workspace
 * volume, labelled as ours), and keeps the set of names that live runs and sessions own, which the reaper
 * spares. One instance per agent process.
 */
export class SandboxDocker {
  readonly docker: Docker;
  readonly instance = randomUUID();
  /** Container and volume names owned by live runs, sessions and the warm pool. */
  readonly live = new Set<string>();
  readonly oom: OomWatch;

  constructor(
    readonly image: string,
    readonly socketPath = '/var/run/docker.sock',
    readonly log: (m: string) => void = () => undefined,
  ) {
    this.docker = new Docker({ socketPath });
    this.oom = new OomWatch(this.docker, log);
  }

  /** The engine's version, or throws if it does not answer. */
  async version(): Promise<string> {
    const v = await withTimeout(this.docker.version(), 3000, 'the Docker engine did not answer in 3 s');
    return v.Version;
  }

  /** The image id of the sandbox image, or null if it is not on this node. */
  async imageId(): Promise<string | null> {
    try {
      return ((await this.docker.getImage(this.image).inspect()) as { Id: string }).Id;
    } catch (e) {
      if (dockerStatus(e) === 404) return null;
      throw e;
    }
  }

  labels(kind: BoxKind, owner: string): Record<string, string> {
    return { [LABEL.owner]: OWNER, [LABEL.kind]: kind, [LABEL.id]: owner, [LABEL.instance]: this.instance, [LABEL.pid]: String(process.pid) };
  }

  /** Creates the workspace volume and the container, attaches to its stdio and starts it. */
  async createBox(spec: BoxSpec): Promise<Box> {
    const name = `svc-${spec.kind}-${spec.owner.replace(/[^a-zA-Z0-9_.-]/g, '_').slice(0, 40)}-${randomBytes(4).toString('hex')}`;
    const volume = `${name}-ws`;
    this.live.add(name).add(volume);
    const labels = this.labels(spec.kind, spec.owner);
    let container: Docker.Container | undefined;
    let stdio: Duplex | undefined;
    try {
      await this.docker.createVolume({ Name: volume, Labels: labels });
      try {
        container = await this.docker.createContainer({
          name,
          Image: this.image,
          Cmd: spec.mode === 'runner' ? RUNNER_CMD : IDLE_CMD,
          User: SANDBOX_UID,
          WorkingDir: WORKSPACE,
          Env: spec.env ?? [],
          Labels: labels,
          AttachStdin: true,
          OpenStdin: true,
          StdinOnce: true,
          AttachStdout: false,
          AttachStderr: false,
          Tty: false,
          HostConfig: hostConfig({ volume, network: spec.network, limits: spec.limits }),
        });
      } catch (e) {
        if (dockerStatus(e) === 404) throw new Error(`the sandbox image ${this.image} is not on this node; build it with installers/sandbox-image/build.sh`);
        throw e;
      }
      // Attached before start, and held: should this agent die, the container's stdin closes and it stops.
      stdio = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
      stdio.on('error', () => undefined);
      if (spec.mode === 'idle') stdio.resume();
      await container.start();
      const info = await container.inspect();
      const box: Box = {
        name,
        id: info.Id,
        volume,
        kind: spec.kind,
        mode: spec.mode,
        owner: spec.owner,
        container,
        stdio,
        imageId: info.Image,
        initPid: info.State.Pid,
        network: spec.network,
        limits: spec.limits,
      };
      await this.oom.track(box);
      return box;
    } catch (e) {
      stdio?.destroy();
      await this.removeByName(name, volume).catch(() => undefined);
      this.live.delete(name);
      this.live.delete(volume);
      throw e;
    }
  }

  /** Kills every process in the box (the container stays until `destroyBox`). */
  async killBox(box: Box): Promise<void> {
    await ignoreGone(box.container.kill({ signal: 'SIGKILL' }));
  }

  /** Removes the container and its volume; idempotent. */
  async destroyBox(box: Box): Promise<void> {
    box.stdio.destroy();
    try {
      await this.removeByName(box.id, box.volume);
    } finally {
      this.oom.untrack(box);
      this.live.delete(box.name);
      this.live.delete(box.volume);
    }
  }

  async removeByName(container: string, volume?: string): Promise<void> {
    await ignoreGone(this.docker.getContainer(container).remove({ force: true, v: true }));
    if (volume) await ignoreGone(this.docker.getVolume(volume).remove({ force: true }));
  }

  /**
   * Removes every container and volume this agent process labelled (its instance), live or not: the last step
   * of a stop, so that a run still being torn down, or a removal under way, leaves nothing behind.
   */
  async removeAll(): Promise<number> {
    const filters = { label: [`${LABEL.instance}=${this.instance}`] };
    const containers = await this.docker.listContainers({ all: true, filters });
    await Promise.all(containers.map((c) => ignoreGone(this.docker.getContainer(c.Id).remove({ force: true, v: true }))));
    const { Volumes: volumes } = await this.docker.listVolumes({ filters });
    await Promise.all((volumes ?? []).map((v) => ignoreGone(this.docker.getVolume(v.Name).remove({ force: true }))));
    this.live.clear();
    return containers.length + (volumes ?? []).length;
  }

  close(): void {
    this.oom.close();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(message)), ms)))]).finally(() => clearTimeout(t));
}
