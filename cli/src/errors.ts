import { CommanderError } from 'commander';
import { ERROR_TYPES } from '@svc/shared';
import { ApiError, type PaymentTerms } from '@svc/shared/client';
import { paint } from './colour.ts';

/**
 * Exit codes. A script branches on these; `svc run` passes the program's own exit code through instead on a
 * run that happened (see docs/cli.md).
 */
export const EXIT_FAILURE = 1;
/** Bad invocation: unknown option, missing argument, malformed value or wallet key. */
export const EXIT_USAGE = 2;
/** Not signed in, session expired or revoked, no API key, or a credential the gateway refused (401). */
export const EXIT_AUTH = 4;
/** Payment required (402): out of credit, a spend cap, or a tripped circuit breaker. */
export const EXIT_PAYMENT = 5;
/** Rate limited or unavailable (429, 503): retry later. */
export const EXIT_RETRY = 6;

let commandExit = 0;
/** A command that succeeded but exits non-zero (`svc run` passing its program's code through, an invalid receipt). */
export function setExitCode(code: number): void {
  commandExit = code;
}
export function commandExitCode(): number {
  return commandExit;
}

/** A failure the CLI explains itself; `hint` says what to do next, on the same line. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILURE,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export function usageError(message: string, hint?: string): CliError {
  return new CliError(message, EXIT_USAGE, hint);
}

export function notSignedIn(url: string, why = `not signed in to ${url}`): CliError {
  return new CliError(why, EXIT_AUTH, 'run `svc login` to sign in');
}

/** Which credential the running command sent, so a 401 can say what to fix. */
export type CredentialUsed = 'session' | 'key' | 'admin' | undefined;
let credentialUsed: CredentialUsed;
export function noteCredential(kind: CredentialUsed): void {
  credentialUsed = kind;
}

/** What the system said about a file or a connection, in words: never a bare `ENOENT`. */
const SYSTEM_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  EEXIST: 'it already exists',
  EMFILE: 'too many open files',
  ENOSPC: 'no space left on the device',
  EROFS: 'the file system is read-only',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved now',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_SOCKET: 'the connection closed unexpectedly',
};

/** Why a file could not be read or written, for a message: "no such file or directory", not "ENOENT". */
export function fileProblem(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.code && SYSTEM_ERRORS[e.code]) return SYSTEM_ERRORS[e.code]!;
  // Node's own text is `ENOENT: no such file or directory, open 'x'`: the words without the code or the call.
  const m = /^[A-Z][A-Z0-9_]+: (.*?)(?:, \w+ '.*')?$/.exec(e?.message ?? '');
  return m ? m[1]! : (e?.message ?? String(err));
}

function networkCause(err: unknown): string | undefined {
  if (!(err instanceof TypeError) || err.message !== 'fetch failed') return undefined;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code && SYSTEM_ERRORS[cause.code]) return SYSTEM_ERRORS[cause.code];
  return cause?.message ?? 'network error';
}

/**
 * An answer without the gateway's error envelope, or a body that is not the JSON it promised: the URL answers,
 * but not as a gateway (another web server, a proxy's own error page).
 */
function notAGateway(err: ApiError): string | null {
  if (/^gateway sent malformed JSON/.test(err.message)) return "its answer is not the gateway's JSON";
  return err.body === undefined ? `it answered HTTP ${err.status} without the gateway's error envelope` : null;
}

/**
 * An error event inside a stream (the answer had begun, so it came with status 200), as the error the same
 * refusal would be had it come first: a 402 exits 5 with its payment terms, a 429 exits 6, and so on. What the
 * table has nothing particular for exits 1 with `retry` as the next step.
 */
export function streamedError(e: { type?: unknown; message?: unknown } | undefined, retry: string, what = 'the stream ended early'): Error {
  const type = typeof e?.type === 'string' ? e.type : 'upstream_error';
  const status = (ERROR_TYPES as Record<string, number>)[type] ?? 502;
  const err = new ApiError(status, { error: { ...e, type, message: typeof e?.message === 'string' ? e.message : what } }, new Headers());
  if (apiHint(err).code !== EXIT_FAILURE) return err;
  return new CliError(`${type}: ${err.message} (${what})`, EXIT_FAILURE, retry);
}

/** Token base units as a decimal amount: 1500000 with 6 decimals -> "1.5". */
export function tokenAmount(baseUnits: string, decimals: number): string {
  if (!/^\d+$/.test(baseUnits) || !Number.isInteger(decimals) || decimals < 0) return `${baseUnits} base units`;
  const padded = baseUnits.padStart(decimals + 1, '0');
  const whole = padded.slice(0, padded.length - decimals);
  const frac = padded.slice(padded.length - decimals).replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : whole;
}

/** The x402 terms of a 402 `insufficient_credit`, and how to pay them, as one clause. */
export function paymentHint(terms: readonly PaymentTerms[]): string {
  const t = terms[0];
  if (!t) return 'deposit USDT (see GET /v1/billing/methods), then run `svc deposit --chain <chain> --tx <hash>`';
  const decimals = typeof t.extra?.decimals === 'number' ? t.extra.decimals : 6;
  const others = terms.length > 1 ? ` (or ${terms.length - 1} other options: GET /v1/billing/methods)` : '';
  return `send at least ${tokenAmount(t.maxAmountRequired, decimals)} USDT (token ${t.asset}) to ${t.payTo} on ${t.network}${others}, then run \`svc deposit --chain ${t.network} --tx <hash>\``;
}

/** What to do next about an API error, when the CLI can say. */
function apiHint(err: ApiError): { hint?: string; code: number } {
  if (err.status === 401) {
    if (credentialUsed === 'key') return { code: EXIT_AUTH, hint: 'the API key was refused: check SVC_KEY or --api-key-file, or create a key with `svc keys create`' };
    if (credentialUsed === 'admin') return { code: EXIT_AUTH, hint: 'check the admin token (--admin-token-file or SVC_ADMIN_TOKEN)' };
    // A refused sign-in: the session hint would send the caller back to the command that just failed.
    if (err.type === 'invalid_siwe' && /Issued At|Not Before|Expiration Time/.test(err.message)) return { code: EXIT_AUTH, hint: "this machine's clock and the gateway's differ by more than a minute: set the clock (NTP) and sign in again" };
    if (err.type === 'invalid_siwe') return { code: EXIT_AUTH };
    return { code: EXIT_AUTH, hint: 'your session may have expired or been revoked; run `svc login`' };
  }
  if (err.status === 402) {
    if (err.isInsufficientCredit()) return { code: EXIT_PAYMENT, hint: paymentHint(err.paymentTerms) };
    if (err.type === 'spend_cap_reached') return { code: EXIT_PAYMENT, hint: "raise the key's cap or use another key (`svc keys create --spend-cap <micro-USD>`)" };
    if (err.type === 'circuit_breaker_tripped') return { code: EXIT_PAYMENT, hint: 'the key is frozen; its owner unfreezes it (POST /v1/keys/{id}/unfreeze)' };
    return { code: EXIT_PAYMENT };
  }
  if (err.status === 429 || err.status === 503) {
    const s = err.retryAfterSeconds;
    return { code: EXIT_RETRY, hint: s !== undefined ? `retry in ${s} s` : 'retry later' };
  }
  if (err.status === 403 && err.type === 'insufficient_scope') return { code: EXIT_AUTH, hint: 'use a key with that scope (`svc keys create --scope <scope>`)' };
  return { code: EXIT_FAILURE };
}

/**
 * Prints an error to stderr as one line, `error: <what>[; <what to do next>]`, and returns the exit code.
 * Commander has already printed its own errors. Never a stack trace.
 */
export function reportError(err: unknown, url: string | undefined, write: (s: string) => void = (s) => process.stderr.write(s)): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
  const line = (message: string, hint?: string) => write(`${paint('red', 'error:')} ${message.replace(/\s*\n\s*/g, ' ')}${hint ? `; ${hint}` : ''}\n`);
  if (err instanceof CliError) {
    line(err.message, err.hint);
    return err.exitCode;
  }
  if (err instanceof ApiError) {
    const other = notAGateway(err);
    if (other) {
      line(`${url ?? 'the server'} is not a svc gateway: ${other}`, 'check --url (or SVC_URL): it takes the gateway\'s origin, such as http://localhost:8080');
      return EXIT_FAILURE;
    }
    const { hint, code } = apiHint(err);
    // A server error is the one worth reporting: its request id finds it in the gateway's logs.
    const id = err.status >= 500 && err.requestId ? ` (request ${err.requestId})` : '';
    line(`${err.type}: ${err.message}${id}`, hint);
    return code;
  }
  const cause = networkCause(err);
  if (cause) {
    line(`cannot reach the gateway at ${url ?? '(unknown url)'}: ${cause}`, 'check --url (or SVC_URL) and that the gateway is running');
    return EXIT_FAILURE;
  }
  if ((err as NodeJS.ErrnoException)?.code && (err as NodeJS.ErrnoException).syscall) {
    const e = err as NodeJS.ErrnoException;
    line(`${e.path ? `${e.path}: ` : ''}${fileProblem(e)}`);
    return EXIT_FAILURE;
  }
  line(err instanceof Error ? err.message : String(err));
  return EXIT_FAILURE;
}
