import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * The suite's global setup (vitest.config.ts): builds the control plane, the node agent and the CLI when a
 * source is newer than its build (`scripts/build.mjs --if-stale`, well under a second when nothing changed),
 * so the child processes tests start (test/support/built.ts) run the code under test.
 */
export default function setup() {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale', 'control-plane', 'node-agent', 'cli'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}
