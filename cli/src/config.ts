import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What `svc login` saves: everything needed to call the gateway as the signed-in account. */
export interface Session {
  url: string;
  token: string;
  account_id: string;
  wallet_address: string;
  expires_at: string;
}

/** A session file that is present but unusable is reported, not thrown: `login` replaces it, `logout` removes it. */
export interface StoredSession {
  session?: Session;
  problem?: string;
}

const FIELDS = ['url', 'token', 'account_id', 'wallet_address', 'expires_at'] as const;

/** SVC_CONFIG_DIR, else $XDG_CONFIG_HOME/svc, else ~/.config/svc. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR;
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'svc');
  return join(homedir(), '.config', 'svc');
}

export function sessionPath(dir: string): string {
  return join(dir, 'session.json');
}

function isSession(v: unknown): v is Session {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return FIELDS.every((f) => typeof o[f] === 'string' && o[f] !== '');
}

export function readSession(dir: string): StoredSession {
  const path = sessionPath(dir);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { problem: `cannot read ${path}: ${(err as Error).message}` };
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return { problem: `${path} is not valid JSON` };
  }
  return isSession(data) ? { session: data } : { problem: `${path} is missing session fields` };
}

/**
 * Writes session.json with mode 0600 (the directory is created 0700). The file is written beside the
 * target and renamed over it, so the token never sits in a file with looser permissions, even an old one.
 */
export function saveSession(dir: string, session: Session): string {
  if (mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined) chmodSync(dir, 0o700);
  const path = sessionPath(dir);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const body = JSON.stringify(Object.fromEntries(FIELDS.map((f) => [f, session[f]])), null, 2) + '\n';
  try {
    writeFileSync(tmp, body, { mode: 0o600, flag: 'wx' });
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  chmodSync(path, 0o600);
  return path;
}

/** Removes session.json; true when there was one. */
export function deleteSession(dir: string): boolean {
  const path = sessionPath(dir);
  try {
    rmSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
