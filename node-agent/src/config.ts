import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The agent's configuration lives in one file, `agent.json`, mode 0600 in a 0700 directory: the control-plane
 * URL, the node key (the credential; never on a command line or in the unit file) and the data directory.
 */
export const AgentConfig = z.object({
  url: z.string().url(),
  node_key: z.string().startsWith('nk-svc_'),
  node_id: z.string().nullable().default(null),
  data_dir: z.string().min(1),
  endpoint: z.string().url().nullable().default(null),
});
export type AgentConfig = z.infer<typeof AgentConfig>;

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_NODE_CONFIG_DIR) return env.SVC_NODE_CONFIG_DIR;
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'svc-node');
  return join(homedir(), '.config', 'svc-node');
}

export function configPath(dir: string): string {
  return join(dir, 'agent.json');
}

export function readConfig(dir: string): AgentConfig {
  const path = configPath(dir);
  if (!existsSync(path)) throw new Error(`no agent configuration at ${path}; run \`svc-node enroll\` first`);
  const parsed = AgentConfig.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!parsed.success) throw new Error(`${path} is not a valid agent configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

export function writeConfig(dir: string, cfg: AgentConfig): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const path = configPath(dir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(cfg, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  // Written by root (`sudo svc-node enroll`) into a directory the agent's user owns (/etc/svc-node, which
  // the package hands to svc-node): the file goes to that user too, so the service can read it.
  if (process.getuid?.() === 0) {
    const owner = statSync(dir);
    if (owner.uid !== 0) chownSync(tmp, owner.uid, owner.gid);
  }
  renameSync(tmp, path);
}

/** The node key from a file (`--key-file`): its one line, trimmed. */
export function readKeyFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read the key file ${path}: ${(e as Error).message}`);
  }
  const key = text.trim();
  if (!/^nk-svc_[A-Za-z0-9_-]+$/.test(key)) throw new Error(`${path} does not hold a node key (one line: nk-svc_ followed by the key that \`svc nodes enroll\` printed)`);
  return key;
}
