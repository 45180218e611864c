import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What `svc login` saves per gateway: everything needed to call it as the signed-in account. */
export interface Session {
  url: string;
  token: string;
  account_id: string;
  wallet_address: string;
  expires_at: string;
}

/**
 * sessions.json: one session per gateway origin (as gh keeps one per host), and the gateway commands use when
 * neither --url nor SVC_URL names one (the last one signed in to).
 */
export interface SessionStore {
  default: string | null;
  sessions: Record<string, Session>;
}

/** A sessions file that is present but unusable is reported, not thrown: `login` replaces it, `logout --all` removes it. */
export interface StoredSessions {
  store: SessionStore;
  problem?: string;
}

const FIELDS = ['url', 'token', 'account_id', 'wallet_address', 'expires_at'] as const;

/** SVC_CONFIG_DIR, else $XDG_CONFIG_HOME/svc, else ~/.config/svc. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR;
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'svc');
  return join(homedir(), '.config', 'svc');
}

export function sessionsPath(dir: string): string {
  return join(dir, 'sessions.json');
}
/** The single-session file of earlier versions, moved into sessions.json when first read. */
function legacyPath(dir: string): string {
  return join(dir, 'session.json');
}

function isSession(v: unknown): v is Session {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return FIELDS.every((f) => typeof o[f] === 'string' && o[f] !== '');
}

const empty = (): SessionStore => ({ default: null, sessions: {} });

function readJson(path: string): { missing: true } | { data: unknown } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { missing: true };
    return { problem: `cannot read ${path}: ${(err as Error).message}` };
  }
  try {
    return { data: JSON.parse(text) };
  } catch {
    return { problem: `${path} is not valid JSON` };
  }
}

/**
 * The saved sessions. An earlier version's session.json (one session) is moved in on first read: its session
 * kept, its gateway the default, the old file removed once sessions.json holds it.
 */
export function readSessions(dir: string): StoredSessions {
  const path = sessionsPath(dir);
  const r = readJson(path);
  if ('problem' in r) return { store: empty(), problem: r.problem };
  if ('data' in r) {
    const d = r.data as { default?: unknown; sessions?: unknown };
    if (typeof d !== 'object' || d === null || typeof d.sessions !== 'object' || d.sessions === null) return { store: empty(), problem: `${path} has no sessions object` };
    const sessions: Record<string, Session> = {};
    for (const [url, s] of Object.entries(d.sessions as Record<string, unknown>)) if (isSession(s) && s.url === url) sessions[url] = s;
    const def = typeof d.default === 'string' && sessions[d.default] ? d.default : (Object.keys(sessions)[0] ?? null);
    return { store: { default: def, sessions } };
  }
  const old = readJson(legacyPath(dir));
  if ('missing' in old) return { store: empty() };
  if ('problem' in old) return { store: empty(), problem: old.problem };
  if (!isSession(old.data)) return { store: empty(), problem: `${legacyPath(dir)} is missing session fields` };
  const s = old.data;
  const store: SessionStore = { default: s.url, sessions: { [s.url]: pick(s) } };
  try {
    saveSessions(dir, store);
  } catch {
    // A read-only config directory: the old file still serves, and the move is tried again next time.
  }
  return { store };
}

const pick = (s: Session): Session => Object.fromEntries(FIELDS.map((f) => [f, s[f]])) as unknown as Session;

/**
 * Writes sessions.json with mode 0600 (the directory is created 0700). The file is written beside the target
 * and renamed over it, so a token never sits in a file with looser permissions, even an old one.
 */
export function saveSessions(dir: string, store: SessionStore): string {
  if (mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined) chmodSync(dir, 0o700);
  const path = sessionsPath(dir);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const sessions = Object.fromEntries(Object.entries(store.sessions).map(([url, s]) => [url, pick(s)]));
  const body = JSON.stringify({ default: store.default, sessions }, null, 2) + '\n';
  try {
    writeFileSync(tmp, body, { mode: 0o600, flag: 'wx' });
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  chmodSync(path, 0o600);
  rmSync(legacyPath(dir), { force: true }); // sessions.json holds every session now
  return path;
}

/** The store with `session` in it, its gateway now the default. */
export function withSession(store: SessionStore, session: Session): SessionStore {
  return { default: session.url, sessions: { ...store.sessions, [session.url]: session } };
}

/** The store without the session of `url`; the default moves to another saved gateway, if any. */
export function withoutSession(store: SessionStore, url: string): SessionStore {
  const { [url]: _gone, ...sessions } = store.sessions;
  const def = store.default !== url && store.default !== null && sessions[store.default] ? store.default : (Object.keys(sessions)[0] ?? null);
  return { default: def, sessions };
}

/** Saves the store, or removes the file when no session is left; the path either way. */
export function storeSessions(dir: string, store: SessionStore): string {
  if (Object.keys(store.sessions).length > 0) return saveSessions(dir, store);
  rmSync(sessionsPath(dir), { force: true });
  rmSync(legacyPath(dir), { force: true });
  return sessionsPath(dir);
}
