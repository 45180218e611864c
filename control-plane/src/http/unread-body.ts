import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';

const DISCARDING = Symbol('discarding');
type Marked = Readable & { [DISCARDING]?: true };

/**
 * Reads and drops the rest of a request body nobody will read: a client that sends the whole body before it
 * reads the answer (many do) then gets the answer, instead of a reset under its last writes. Past `cap` more
 * bytes the connection is closed instead. Once per body; false when it was already being discarded.
 */
export function discardRest(body: Readable, cap: number): boolean {
  const b = body as Marked;
  if (b[DISCARDING] || b.readableEnded || b.destroyed) return false;
  b[DISCARDING] = true;
  let left = cap;
  b.on('data', (piece: Buffer) => {
    left -= piece.length;
    if (left < 0) b.destroy();
  });
  b.resume();
  return true;
}

/**
 * Before an error answer goes out on a request whose body has not all arrived (refused before or while it
 * was read): whether the connection must close after the answer. It need not when the rest, declared
 * within `cap`, is read and dropped; a body declared past `cap` is not waited for.
 */
export function closeAfterAnswer(req: IncomingMessage, cap: number): boolean {
  if (req.complete || (req as Marked)[DISCARDING]) return false;
  if (Number(req.headers['content-length']) > cap) return true;
  discardRest(req, cap);
  return false;
}
