import { CommanderError } from 'commander';
import { ApiError } from '@svc/shared/client';

export const EXIT_FAILURE = 1;
/** Bad invocation: unknown option, missing argument, malformed value or wallet key. */
export const EXIT_USAGE = 2;

/** A failure the CLI explains itself; `hint` is printed on a second line. */
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
  return new CliError(why, EXIT_FAILURE, 'run `svc login` to sign in');
}

function networkCause(err: unknown): string | undefined {
  if (!(err instanceof TypeError) || err.message !== 'fetch failed') return undefined;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? 'network error';
}

/** Prints an error to stderr and returns the process exit code. Commander has already printed its own errors. */
export function reportError(err: unknown, url: string | undefined, write: (s: string) => void = (s) => process.stderr.write(s)): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
  if (err instanceof CliError) {
    write(`error: ${err.message}\n`);
    if (err.hint) write(`hint: ${err.hint}\n`);
    return err.exitCode;
  }
  if (err instanceof ApiError) {
    write(`error: ${err.type}: ${err.message}\n`);
    if (err.requestId) write(`request id: ${err.requestId}\n`);
    if (err.status === 401) write('hint: your session may have expired or been revoked; run `svc login`\n');
    return EXIT_FAILURE;
  }
  const cause = networkCause(err);
  if (cause) {
    write(`error: cannot reach the gateway at ${url ?? '(unknown url)'}: ${cause}\n`);
    return EXIT_FAILURE;
  }
  write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT_FAILURE;
}
