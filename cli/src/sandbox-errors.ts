import { ApiError } from '@svc/shared/client';
import { CliError, EXIT_FAILURE } from './errors.ts';

const OPEN_HINT = 'open one with `svc sandbox open`, or list yours with `svc sandbox list`';

/**
 * A session route's failure, said for a person: a session that is not there (or not the key's account's) or no
 * longer running names what to do next; other answers go as the gateway gave them.
 */
export function sessionError(id: string, err: unknown): unknown {
  if (!(err instanceof ApiError)) return err;
  if (err.status === 404 && /session/i.test(err.message)) return new CliError(`no sandbox session ${id} (not found, or not this key's account)`, EXIT_FAILURE, OPEN_HINT);
  if (err.status === 409 && err.extra.reason === 'terminal_limit') return new CliError(`sandbox session ${id}: ${err.message}`, EXIT_FAILURE, 'leave one of its terminals, then try again');
  if (err.status === 409) return new CliError(`sandbox session ${id}: ${err.message}`, EXIT_FAILURE, OPEN_HINT);
  return err;
}

/** Runs a call about one session, its failures said as sessionError says them. */
export async function onSession<T>(id: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw sessionError(id, e);
  }
}
