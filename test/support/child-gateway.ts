import { spawn, type ChildProcess } from 'node:child_process';
import { ADMIN_TOKEN, freePort } from './gateway.ts';

/**
 * A control plane in a real child process (`control-plane/src/main.ts`) on a data dir and database another
 * gateway of the test created, for tests that kill it (SIGKILL). Resolves once it answers /healthz.
 */
export async function startChildGateway(share: { dataDir: string; databaseUrl: string | undefined }, env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess; kill(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'control-plane/src/main.ts'], {
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      SVC_DATA_DIR: share.dataDir,
      ...(share.databaseUrl ? { DATABASE_URL: share.databaseUrl } : {}),
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_LOG_LEVEL: 'silent',
      SVC_LOCAL_AGENT: 'off',
      ...env,
    },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  // A real child process has to boot: poll its health (bounded).
  const deadline = Date.now() + 90_000;
  while (!(await fetch(`${url}/healthz`).then((r) => r.ok, () => false))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('the gateway child process did not come up');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    child,
    async kill() {
      child.kill('SIGKILL');
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    },
  };
}
