import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { request } from 'node:http';
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

/**
 * `npm start` convenience: where Docker is there, run a local node agent as a child process, enrolled once
 * as an approved house sandbox node whose configuration (and key, 0600) lives in the data directory.
 */
export async function startLocalAgent(gw: Gateway, url: string): Promise<(() => void) | null> {
  if (!(await dockerAnswers())) {
    gw.app.log.info('no Docker engine answers on /var/run/docker.sock: not starting a local node agent');
    return null;
  }
  const dir = resolve(gw.config.dataDir, 'local-agent');
  const cfgPath = join(dir, 'agent.json');
  if (!existsSync(cfgPath)) {
    const { node, node_key } = await gw.fleet.registry.enroll('', { kinds: ['sandbox'], name: 'local' }, true);
    await gw.fleet.registry.approve(node.id, true);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(cfgPath, JSON.stringify({ url, node_key, node_id: node.id, data_dir: join(dir, 'data'), endpoint: null }, null, 2), { mode: 0o600 });
    chmodSync(cfgPath, 0o600);
  } else {
    const cfg = JSON.parse(readFileSync(cfgPath, 'utf8')) as { url: string };
    if (cfg.url !== url) writeFileSync(cfgPath, JSON.stringify({ ...cfg, url }, null, 2), { mode: 0o600 });
  }
  const cli = fileURLToPath(new URL('../../node-agent/src/cli.ts', import.meta.url));
  let child: ChildProcess | null = spawn(process.execPath, ['--import', 'tsx', cli, 'run', '--config-dir', dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  child.on('exit', (code) => {
    if (child) gw.app.log.warn({ code }, 'local node agent exited');
    child = null;
  });
  gw.app.log.info({ config: cfgPath }, 'local node agent started');
  return () => {
    const c = child;
    child = null;
    c?.kill('SIGTERM');
  };
}
