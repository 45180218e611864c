import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The node agent's packages (scripts/package-agent.mjs): dist/svc-node-<version>-linux-x64.tar.gz and
 * dist/svc-node_<version>_amd64.deb. CI builds them once before the tests (.ci/run); a test run without them
 * builds them here (a few minutes the first time: it fetches the Node.js runtime and compiles node-pty).
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const AGENT_VERSION = (JSON.parse(readFileSync(join(ROOT, 'node-agent', 'package.json'), 'utf8')) as { version: string }).version;
export const PACKAGE_NODE_VERSION = /export const NODE_VERSION = '([^']+)'/.exec(readFileSync(join(ROOT, 'scripts', 'package-agent.mjs'), 'utf8'))![1]!;

export interface AgentPackages {
  tarball: string;
  deb: string;
}

export function agentPackages(): AgentPackages {
  const tarball = join(ROOT, 'dist', `svc-node-${AGENT_VERSION}-linux-x64.tar.gz`);
  const deb = join(ROOT, 'dist', `svc-node_${AGENT_VERSION.replace('-', '~')}_amd64.deb`);
  if (!existsSync(tarball) || !existsSync(deb)) {
    const r = spawnSync(process.execPath, ['scripts/package-agent.mjs', '--if-absent'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (r.status !== 0) throw new Error(`npm run package:agent failed:\n${r.stderr.slice(-3000)}`);
  }
  return { tarball, deb };
}

/** Runs a command; its exit code and output, never throwing. */
export function sh(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeout?: number } = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: opts.timeout ?? 120_000, ...opts });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
}
