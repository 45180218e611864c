import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Gateway } from './gateway.ts';

/** True when a Docker engine answers on the local socket. */
export function dockerAnswers(socketPath = '/var/run/docker.sock'): Promise<boolean> {
  return new Promise((done) => {
    const req = request({ socketPath, path: '/_ping', method: 'GET', timeout: 1500 }, (res) => {
      res.resume();
      done(res.statusCode === 200);
    });
    req.on('error', () => done(false));
    req.on('timeout', () => {
      req.destroy();
      done(false);
    });
    req.end();
  });
}

/** The agent's own line prefix (`[svc-node] <ISO time> <message>`): the gateway's log gives the time and the source. */
const AGENT_LINE = /^\[svc-node\] \S+ (.*)$/;

/** The agent's lines as records of the gateway's log, so they read as its own do (on a terminal or as JSON). */
function forwardLines(child: ChildProcess, log: { info(msg: string): void; warn(msg: string): void }): void {
  for (const [stream, level] of [[child.stdout, 'info'], [child.stderr, 'warn']] as const) {
    if (!stream) continue;
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      if (line.trim() === '') return;
      log[level](AGENT_LINE.exec(line)?.[1] ?? line.replace(/^svc-node: /, ''));
    });
  }
}

/** The readiness condition the local node agent holds (`/readyz`). */
export const LOCAL_AGENT_READY = 'local_agent';
/** How long a stop waits for the local agent to remove its sandboxes and exit before killing it. */
const AGENT_STOP_MS = 60_000;

export interface LocalAgent {
  nodeId: string;
  /**
   * Stops the agent once (SIGTERM; a repeated signal is ignored by the agent, so one the terminal already sent
   * to the whole process group does no harm) and resolves when it has exited: it removes its sandbox
   * containers and volumes first. Killed after AGENT_STOP_MS.
   */
  stop(): Promise<void>;
}

/**
 * `npm start` convenience: where Docker is there, run a local node agent as a child process, enrolled once
 * as an approved house sandbox node whose configuration (and key, 0600) lives in the data directory.
 * `/readyz` answers 200 only while it is connected and has heartbeated (it takes work from then on).
 */
export async function startLocalAgent(gw: Gateway, url: string): Promise<LocalAgent | null> {
  const readiness = gw.services.health.readiness;
  if (!(await dockerAnswers())) {
    gw.app.log.info('no Docker engine answers on /var/run/docker.sock: not starting a local node agent');
    readiness.release(LOCAL_AGENT_READY);
    return null;
  }
  const dir = resolve(gw.config.dataDir, 'local-agent');
  const cfgPath = join(dir, 'agent.json');
  let nodeId: string;
  if (!existsSync(cfgPath)) {
    const { node, node_key } = await gw.fleet.registry.enroll('', { kinds: ['sandbox'], name: 'local' }, true);
    await gw.fleet.registry.approve(node.id, true);
    nodeId = node.id;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(cfgPath, JSON.stringify({ url, node_key, node_id: node.id, data_dir: join(dir, 'data'), endpoint: null }, null, 2), { mode: 0o600 });
    chmodSync(cfgPath, 0o600);
  } else {
    const cfg = JSON.parse(readFileSync(cfgPath, 'utf8')) as { url: string; node_id: string };
    nodeId = cfg.node_id;
    if (cfg.url !== url) writeFileSync(cfgPath, JSON.stringify({ ...cfg, url }, null, 2), { mode: 0o600 });
  }
  // The built gateway names the built agent here (scripts/build.mjs rewrites the URL); from the sources, tsx runs it.
  const cli = fileURLToPath(new URL('../../node-agent/src/cli.ts', import.meta.url));
  const run = cli.endsWith('.ts') ? ['--import', 'tsx', cli] : ['--enable-source-maps', cli];
  const child: ChildProcess = spawn(process.execPath, [...run, 'run', '--config-dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  forwardLines(child, gw.app.log.child({ component: 'agent' }));
  let stopping: Promise<void> | null = null;
  const exited = new Promise<void>((done) =>
    child.once('exit', (code, signal) => {
      if (!stopping) gw.app.log.warn({ code, signal }, 'local node agent exited');
      done();
    }),
  );
  readiness.require(LOCAL_AGENT_READY, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return 'the local node agent exited';
    if (!gw.fleet.hub.isConnected(nodeId)) return 'the local node agent is not connected yet';
    // Online for the scheduler: a heartbeat of this run (or one recent enough). A gate an admin set stays theirs.
    const status = gw.fleet.registry.publicView(await gw.fleet.registry.get(nodeId)).status;
    if (status === 'offline') return 'the local node agent has not sent its first heartbeat yet';
    return status === 'pending_approval' ? 'the local node is not approved' : null;
  });
  gw.app.log.info({ config: cfgPath, node_id: nodeId }, 'local node agent started');
  return {
    nodeId,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), AGENT_STOP_MS)));
        if ((await Promise.race([exited, late])) === 'late') {
          gw.app.log.warn(`the local node agent did not stop in ${AGENT_STOP_MS / 1000} s; killing it (its sandboxes are removed by the reaper at its next start)`);
          child.kill('SIGKILL');
          await exited;
        }
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
