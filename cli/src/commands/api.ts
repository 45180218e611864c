import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { SvcClient } from '@svc/shared/client';
import { apiKey, context, usableSession, type Context } from '../context.ts';
import { CliError, EXIT_AUTH, EXIT_FAILURE, EXIT_PAYMENT, EXIT_RETRY, EXIT_USAGE, fileProblem, noteCredential, setExitCode, usageError } from '../errors.ts';
import { readStdin } from '../input.ts';
import { paint } from '../colour.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

interface ApiOptions {
  field: Array<[string, unknown]>;
  rawField: Array<[string, unknown]>;
  header: Record<string, string>;
  input?: string;
  include?: boolean;
  silent?: boolean;
}

/** A `-F key=value` value as gh types it: true, false, null and integers as JSON, `@file` the file's text (`@-` stdin). */
function typed(value: string): unknown {
  if (value === 'true') return true;
  if (value === 'false') return false;
  if (value === 'null') return null;
  if (/^-?\d{1,15}$/.test(value)) return Number(value);
  if (value.startsWith('@')) {
    const path = value.slice(1);
    if (path === '-') return { stdin: true };
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new InvalidArgumentError(`cannot read ${path}: ${fileProblem(err)}`);
    }
  }
  return value;
}

const field = (parse: (v: string) => unknown) => (value: string, previous: Array<[string, unknown]> = []) => {
  const eq = value.indexOf('=');
  if (eq < 1) throw new InvalidArgumentError(`expected key=value, got "${value}"`);
  return [...previous, [value.slice(0, eq), parse(value.slice(eq + 1))] as [string, unknown]];
};

function header(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const colon = value.indexOf(':');
  const name = value.slice(0, colon).trim();
  if (colon < 1 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new InvalidArgumentError(`expected "Name: value", got "${value}"`);
  return { ...previous, [name.toLowerCase()]: value.slice(colon + 1).trim() };
}

/** `a=1`, `b[c]=2`, `d[]=3` `d[]=4` as {a: 1, b: {c: 2}, d: [3, 4]} (gh's nesting). */
export function nest(pairs: ReadonlyArray<[string, unknown]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of pairs) {
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    if (!m) throw usageError(`field name "${key}" is not name, name[key] or name[]`);
    const path = [m[1]!, ...[...m[2]!.matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1]!)];
    let at: Record<string, unknown> | unknown[] = out;
    for (let i = 0; i < path.length; i++) {
      const k = path[i]!;
      const last = i === path.length - 1;
      const next = path[i + 1];
      const slot = (): unknown => (next === '' ? [] : {});
      if (Array.isArray(at)) {
        if (last) at.push(value);
        else {
          const child = slot();
          at.push(child);
          at = child as Record<string, unknown>;
        }
        continue;
      }
      if (last) at[k] = value;
      else at = (at[k] ??= slot()) as Record<string, unknown>;
    }
  }
  return out;
}

/** The credential a raw call carries: the API key when one is given, else the session of this gateway. */
function credentials(ctx: Context): Array<{ kind: 'key' | 'session'; token: string }> {
  const out: Array<{ kind: 'key' | 'session'; token: string }> = [];
  if (ctx.apiKeyFile !== undefined || ctx.env.SVC_KEY?.trim()) out.push({ kind: 'key', token: apiKey(ctx) });
  const s = usableSession(ctx);
  if ('session' in s) out.push({ kind: 'session', token: s.session.token });
  return out;
}

/** The CLI's exit code for an HTTP status, as for its own commands (docs/cli.md). */
function exitFor(status: number): number {
  if (status < 400) return 0;
  if (status === 401 || status === 403) return EXIT_AUTH;
  if (status === 402) return EXIT_PAYMENT;
  if (status === 429 || status === 503) return EXIT_RETRY;
  return EXIT_FAILURE;
}

export function registerApi(program: Command): void {
  program
    .command('api <method-or-path> [path]')
    .description('Call any route of the gateway with your API key or session attached, and print the answer (as `gh api`)')
    .option('-F, --field <key=value>', 'a typed field (true, false, null and integers as JSON; @file reads a file); repeatable', field(typed), [])
    .option('-f, --raw-field <key=value>', 'a string field; repeatable', field((v) => v), [])
    .option('-H, --header <name: value>', 'a request header; repeatable', header, {})
    .option('--input <file>', 'the request body from a file (- for stdin) instead of fields')
    .option('-i, --include', 'print the status line and response headers before the body')
    .option('--silent', 'print nothing of the answer (the exit code tells)')
    .addHelpText(
      'after',
      `
METHOD is one of ${METHODS.join(', ')}; without it, GET, or POST when fields or --input are given. Fields go in the query string of a GET or HEAD, else in a JSON body; name[key]=v nests and name[]=v makes a list. The API key (SVC_KEY or --api-key-file) is sent when given, else this gateway's saved session; a route that takes the other kind is retried with it. Exit codes: 0 for 2xx, else as the CLI's own (4 for 401 and 403, 5 for 402, 6 for 429 and 503, 1 otherwise).
Examples:
  svc api /v1/auth/me
  svc api POST /v1/keys -f name=ci -F spend_cap_micro_usd=5000000 -f 'scopes[]=inference'
  svc api POST /v1/chat/completions --input request.json`,
    )
    .action(async (first: string, second: string | undefined, opts: ApiOptions, cmd: Command) => {
      const ctx = context(cmd);
      const hasMethod = second !== undefined;
      const path = hasMethod ? second : first;
      const pairs = [...opts.field, ...opts.rawField];
      const method = hasMethod ? first.toUpperCase() : pairs.length || opts.input !== undefined ? 'POST' : 'GET';
      if (!METHODS.includes(method)) throw usageError(`unknown method "${first}"`, `use one of ${METHODS.join(', ')}`);
      if (!path.startsWith('/')) throw usageError(`the path "${path}" must start with /`, 'for example /v1/auth/me');
      if (opts.input !== undefined && pairs.length) throw usageError('give --input or fields, not both');
      const fields = nest(await Promise.all(pairs.map(async ([k, v]) => [k, v && typeof v === 'object' && 'stdin' in v ? await readStdin() : v] as [string, unknown])));

      const headers: Record<string, string> = { accept: 'application/json, text/event-stream;q=0.9, */*;q=0.8', ...opts.header };
      let target = path;
      let body: string | Uint8Array | undefined;
      if (method === 'GET' || method === 'HEAD') {
        const q = new URLSearchParams(Object.entries(fields).map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
        if (q.size) target += (target.includes('?') ? '&' : '?') + q.toString();
      } else if (opts.input !== undefined) {
        body = opts.input === '-' ? await readStdin() : readInputFile(opts.input);
        headers['content-type'] ??= 'application/json';
      } else if (pairs.length) {
        body = JSON.stringify(fields);
        headers['content-type'] ??= 'application/json';
      }

      const creds = headers.authorization ? [] : credentials(ctx);
      const send = (c: (typeof creds)[number] | undefined) => {
        if (c) noteCredential(c.kind);
        return new SvcClient({ baseUrl: ctx.url, credential: c }).raw(method, target, { headers, ...(body !== undefined ? { body } : {}) });
      };
      let res = await send(creds[0]);
      // The route takes the other kind of credential: refused before it ran, so sending it again is safe.
      if (res.status === 401 && creds[1]) {
        const text = await res.clone().text();
        if (/"wrong_credential_kind"/.test(text)) res = await send(creds[1]);
      }
      const text = method === 'HEAD' ? '' : await res.text();
      if (!opts.silent) {
        if (opts.include) {
          process.stdout.write(`HTTP/1.1 ${res.status} ${res.statusText}\n`);
          for (const [k, v] of res.headers) process.stdout.write(`${paint('bold', k, process.stdout)}: ${v}\n`);
          process.stdout.write('\n');
        }
        process.stdout.write(pretty(text, res.headers.get('content-type') ?? ''));
      }
      const code = exitFor(res.status);
      if (code !== 0) {
        let type = '';
        try {
          type = (JSON.parse(text) as { error?: { type?: string } }).error?.type ?? '';
        } catch {
          // not the error envelope
        }
        process.stderr.write(`${paint('red', 'error:')} HTTP ${res.status}${type ? ` ${type}` : ''} from ${method} ${path}\n`);
        setExitCode(code);
      }
    });
}

/** JSON indented for a person on a terminal; as sent otherwise (a pipe gets the bytes the gateway answered). */
function pretty(text: string, type: string): string {
  if (!text) return '';
  if (process.stdout.isTTY && type.includes('json')) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2) + '\n';
    } catch {
      // fall through: as sent
    }
  }
  return text.endsWith('\n') ? text : text + '\n';
}

function readInputFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${fileProblem(err)}`, EXIT_USAGE);
  }
}
