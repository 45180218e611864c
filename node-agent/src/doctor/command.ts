import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readCapabilities, dockerReachable } from '../capabilities.ts';
import { AGENT_VERSION } from '../agent.ts';
import { configPath, readConfig } from '../config.ts';
import { inferenceOptionsFromEnv } from '../inference/index.ts';
import { DEFAULT_IMAGE, sandboxOptionsFromEnv } from '../sandbox/index.ts';
import { runChecks, type Check, type DoctorInputs } from './checks.ts';

/** How to build the sandbox image here: the script the package ships beside the agent, else the checkout's. */
function imageBuild(image: string): string {
  const tag = image === DEFAULT_IMAGE ? '' : ` --tag ${image}`;
  const shipped = fileURLToPath(new URL('../sandbox-image/build.sh', import.meta.url));
  return existsSync(shipped) ? `sudo ${shipped}${tag}` : `sudo bash installers/sandbox-image/build.sh${tag} (in a checkout of the svc repository)`;
}

/** Lines for a terminal: one per check, and what to do under a failed one. */
export function formatChecks(checks: Check[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.flatMap((c) => [`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(width)}  ${c.detail}`, ...(c.ok || !c.fix ? [] : [`      ${' '.repeat(width)}  -> ${c.fix}`])]);
  const failed = checks.filter((c) => !c.ok).length;
  lines.push(failed ? `${failed} of ${checks.length} checks failed` : `all ${checks.length} checks passed`);
  return `${lines.join('\n')}\n`;
}

/** `svc-node doctor`: runs the checks with this host's configuration and environment; the exit code. */
export async function doctorCommand(dir: string, o: { json: boolean }): Promise<number> {
  let config: DoctorInputs['config'];
  try {
    config = readConfig(dir);
  } catch (e) {
    config = { error: (e as Error).message, path: configPath(dir) };
  }
  let inference: DoctorInputs['inference'];
  try {
    inference = inferenceOptionsFromEnv(process.env);
  } catch (e) {
    inference = { error: (e as Error).message };
  }
  const sandbox = sandboxOptionsFromEnv(process.env);
  const image = sandbox.image ?? DEFAULT_IMAGE;
  const dockerSocket = sandbox.socketPath ?? '/var/run/docker.sock';
  const checks = await runChecks({
    config,
    dockerSocket,
    image,
    imageBuild: imageBuild(image),
    inference,
    capabilities: () => readCapabilities(() => dockerReachable(dockerSocket)),
    agentVersion: AGENT_VERSION,
  });
  const ok = checks.every((c) => c.ok);
  process.stdout.write(o.json ? `${JSON.stringify({ ok, checks }, null, 2)}\n` : formatChecks(checks));
  return ok ? 0 : 1;
}
