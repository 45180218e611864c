import { readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import { SvcClient } from '@svc/shared/client';
import { configDir, readSessions, type Session, type SessionStore } from './config.ts';
import { CliError, EXIT_AUTH, noteCredential, notSignedIn, usageError, fileProblem } from './errors.ts';
import { createOutput, type Output } from './output.ts';

export const DEFAULT_URL = 'http://localhost:8080';

export interface GlobalOptions {
  url?: string;
  json?: boolean;
  apiKeyFile?: string;
}

/** What every command works with: the resolved gateway, the state directory, the saved sessions and the output. */
export interface Context {
  url: string;
  dir: string;
  /** The saved session for this gateway, if any. */
  session: Session | undefined;
  /** Every saved session (one per gateway) and the default gateway. */
  store: SessionStore;
  /** Why a sessions file that exists could not be used. */
  sessionProblem: string | undefined;
  out: Output;
  /** An anonymous client for the resolved gateway. */
  client: SvcClient;
  /** --api-key-file, for commands that call key routes. */
  apiKeyFile: string | undefined;
  env: NodeJS.ProcessEnv;
}

/** The bare origin of a gateway URL; the API client adds the /v1 paths itself. */
export function normalizeUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw usageError(`--url ${JSON.stringify(raw)} is not a URL`, 'give an origin such as http://localhost:8080');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw usageError(`--url must be http or https, got ${u.protocol}`);
  return u.origin;
}

/**
 * The gateway is --url, else SVC_URL, else the default of the saved sessions (the last signed in to), else
 * localhost:8080. A saved session is only used for the gateway it was issued by.
 */
let lastUrl: string | undefined;
/** The gateway the running command resolved, for error messages. */
export function resolvedUrl(): string | undefined {
  return lastUrl;
}

export function context(cmd: Command, env: NodeJS.ProcessEnv = process.env): Context {
  const g = cmd.optsWithGlobals<GlobalOptions>();
  const dir = configDir(env);
  const stored = readSessions(dir);
  const explicit = g.url || env.SVC_URL || undefined;
  const url = normalizeUrl(explicit ?? stored.store.default ?? DEFAULT_URL);
  lastUrl = url;
  return {
    url,
    dir,
    session: stored.store.sessions[url],
    store: stored.store,
    sessionProblem: stored.problem,
    out: createOutput(g.json === true),
    client: new SvcClient({ baseUrl: url }),
    apiKeyFile: g.apiKeyFile,
    env,
  };
}

/** The saved session for this gateway, if usable; otherwise why not. */
export function usableSession(ctx: Context, now = Date.now()): { session: Session } | { why: string } {
  if (ctx.sessionProblem) return { why: `the saved session is unusable: ${ctx.sessionProblem}` };
  const s = ctx.session;
  const others = Object.keys(ctx.store.sessions);
  if (!s) return { why: `not signed in to ${ctx.url}${others.length ? ` (signed in to ${others.join(', ')})` : ''}` };
  const exp = Date.parse(s.expires_at);
  if (Number.isFinite(exp) && exp <= now) return { why: `your session for ${ctx.url} expired at ${s.expires_at}` };
  return { session: s };
}

/** A client carrying the saved session; a command that needs one fails with a pointer to `svc login`. */
export function sessionClient(ctx: Context): { client: SvcClient; session: Session } {
  const r = usableSession(ctx);
  if ('why' in r) throw notSignedIn(ctx.url, r.why);
  noteCredential('session');
  return { client: ctx.client.withCredential({ kind: 'session', token: r.session.token }), session: r.session };
}

const KEY_HINT = 'set SVC_KEY to an API key (sk-svc_...) or pass --api-key-file <path>; create one with `svc keys create --scope inference,sandboxes`';

/** The API key for key routes (inference, sandboxes): --api-key-file wins over SVC_KEY. Never an argument; never echoed. */
export function apiKey(ctx: Context): string {
  const file = ctx.apiKeyFile;
  let token: string | undefined;
  let source: string;
  if (file !== undefined) {
    source = `API key file ${file}`;
    let raw: string;
    let mode: number;
    try {
      mode = statSync(file).mode;
      raw = readFileSync(file, 'utf8');
    } catch (err) {
      throw usageError(`cannot read ${source}: ${fileProblem(err)}`, KEY_HINT);
    }
    if ((mode & 0o077) !== 0) ctx.out.note(`warning: ${source} is readable by other users; chmod 600 it`);
    token = raw.trim();
  } else {
    source = 'SVC_KEY';
    token = ctx.env.SVC_KEY?.trim() || undefined;
    if (token === undefined) throw new CliError('no API key given', EXIT_AUTH, KEY_HINT);
  }
  if (!token || /\s/.test(token)) throw usageError(`${source} does not hold an API key (one line, no spaces)`, KEY_HINT);
  if (token.startsWith('sess_')) throw usageError(`${source} holds a session token, not an API key`, KEY_HINT);
  return token;
}

/** A client carrying the API key (see apiKey). */
export function keyClient(ctx: Context): SvcClient {
  const token = apiKey(ctx);
  noteCredential('key');
  return ctx.client.withCredential({ kind: 'key', token });
}
