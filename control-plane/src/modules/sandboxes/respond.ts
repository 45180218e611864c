import type { FastifyReply, FastifyRequest } from 'fastify';
import { RECEIPT_HEADERS, ServiceError, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { Idempotency } from '../../http/idempotency.ts';
import { callerGone } from '../../http/caller-signal.ts';
import { receiptEvent, setReceiptHeaders } from '../../http/receipt-headers.ts';
import { LazySse } from '../../http/sse.ts';
import { noteStreamError } from '../../http/request-log.ts';
import type { ExecContext } from './executor.ts';
import type { RunResult } from './schemas.ts';

type Exec = (ctx: Pick<ExecContext, 'onOutput' | 'signal' | 'onSent'>) => Promise<{ result: RunResult; receipt: SignedReceipt }>;

/** Keeps what is answered for an Idempotency-Key replay: awaited before the answer's end leaves (see withIdempotency). */
export type RecordAnswer<T> = (sent: T) => Promise<void>;

/**
 * Answers a metered sandbox execution: JSON with receipt headers, or SSE ending in the receipt event.
 * Returns what was answered (`record`ed first); null when a stream ended in an error or its caller left.
 *
 * A stream opens once the program's job went out to its node: what refuses it before (no credit, a spend cap, the
 * breaker, no node) is a plain answer with its status, as a non-streamed request gets. Its headers carry
 * `x-svc-receipt-id` (the request id), so a caller that leaves can fetch the receipt of what ran later with
 * GET /v1/receipts/{id}: the program is stopped when its caller leaves, and charged for the seconds it ran.
 */
export async function respondExec(req: FastifyRequest, reply: FastifyReply, stream: boolean, exec: Exec, record: RecordAnswer<RunResult> = async () => undefined): Promise<RunResult | null> {
  if (!stream) {
    const { result, receipt } = await exec({});
    setReceiptHeaders(reply, receipt);
    reply.code(200);
    await record(result);
    await reply.send(result);
    return result;
  }
  const gone = callerGone(reply.raw);
  const out = new LazySse(reply, gone);
  try {
    const { result, receipt } = await exec({ onOutput: (o) => out.send({ data: o.data }, o.stream), signal: gone, onSent: () => void out.open() });
    if (gone.aborted) return left(reply, out); // charged for what ran; nobody to answer (and its Idempotency-Key is free again)
    const { stdout: _o, stderr: _e, ...meta } = result;
    out.send(meta, 'result');
    out.send(receiptEvent(receipt), 'receipt');
    setReceiptHeaders(reply, receipt); // not sent (the stream began), but kept for an Idempotency-Key replay
    await record(result); // before the stream ends: a caller that saw its end and retried finds the record done
    return result;
  } catch (e) {
    if (gone.aborted) return left(reply, out);
    if (!out.opened) throw e; // before the stream opened: the error's own status and envelope
    const err = e instanceof ServiceError ? { type: e.type, message: e.message, ...e.extra } : { type: 'internal_error', message: 'Internal error' };
    if (!(e instanceof ServiceError)) req.log.error({ err: e }, 'sandbox stream failed');
    noteStreamError(req, err.type);
    out.send({ error: { ...err, request_id: req.id } }, 'error');
    return null;
  } finally {
    out.close();
  }
}

/** The caller went away: nothing is answered (a stream that never opened is ended here). */
function left(reply: FastifyReply, out: LazySse): null {
  if (!out.opened) {
    reply.hijack();
    reply.raw.end();
  }
  return null;
}

/**
 * Wraps a handler in Idempotency-Key semantics when the header is present. `run` answers the request, calling
 * `record` with the body (its status code and receipt headers set on the reply) before the answer's end
 * leaves: a caller that got the answer and sends the key again must find it done, not still running. It
 * returns the body (null if it failed). `store` shapes what is kept for a replay.
 */
export async function withIdempotency<T>(
  idem: Idempotency,
  req: FastifyRequest,
  reply: FastifyReply,
  route: string,
  run: (record: RecordAnswer<T>) => Promise<T | null>,
  store: (sent: T) => unknown = (sent) => sent,
): Promise<void> {
  const key = req.headers['idempotency-key'];
  if (key === undefined) {
    await run(async () => undefined);
    return;
  }
  if (typeof key !== 'string') throw new ServiceError('invalid_request', 'Idempotency-Key: give one value', { param: 'Idempotency-Key' });
  const accountId = (req.principal as KeyPrincipal).accountId;
  const outcome = await idem.begin(accountId, route, key, Idempotency.digest(req.body));
  if (outcome.kind === 'replay') {
    for (const [h, v] of Object.entries(outcome.headers)) reply.header(h, v);
    reply.header('idempotent-replayed', 'true');
    await reply.code(outcome.statusCode).send(outcome.body);
    return;
  }
  const record = async (sent: T) => {
    const headers: Record<string, string> = {};
    for (const h of Object.values(RECEIPT_HEADERS)) {
      const v = reply.getHeader(h);
      if (typeof v === 'string') headers[h] = v;
    }
    await idem.complete(accountId, route, key, reply.statusCode, store(sent), headers);
  };
  try {
    if ((await run(record)) === null) await idem.abandon(accountId, route, key);
  } catch (e) {
    await idem.abandon(accountId, route, key);
    throw e;
  }
}
