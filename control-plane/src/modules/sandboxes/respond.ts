import type { FastifyReply, FastifyRequest } from 'fastify';
import { RECEIPT_HEADERS, ServiceError, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { Idempotency } from '../../http/idempotency.ts';
import { receiptEvent, setReceiptHeaders } from '../../http/receipt-headers.ts';
import { SseStream } from '../../http/sse.ts';
import { noteStreamError } from '../../http/request-log.ts';
import type { ExecContext } from './executor.ts';
import type { RunResult } from './schemas.ts';

type Exec = (ctx: Pick<ExecContext, 'onOutput' | 'signal'>) => Promise<{ result: RunResult; receipt: SignedReceipt }>;

/** Keeps what is answered for an Idempotency-Key replay: awaited before the answer's end leaves (see withIdempotency). */
export type RecordAnswer<T> = (sent: T) => Promise<void>;

/**
 * Answers a metered sandbox execution: JSON with receipt headers, or SSE ending in the receipt event.
 * Returns what was answered (`record`ed first); null when a stream ended in an error.
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
  const sse = new SseStream(reply);
  const ac = new AbortController();
  sse.onClose(() => ac.abort('client went away'));
  try {
    const { result, receipt } = await exec({ onOutput: (o) => sse.send({ data: o.data }, { event: o.stream }), signal: ac.signal });
    const { stdout: _o, stderr: _e, ...meta } = result;
    sse.send(meta, { event: 'result' });
    sse.send(receiptEvent(receipt), { event: 'receipt' });
    setReceiptHeaders(reply, receipt); // not sent (the stream began), but kept for an Idempotency-Key replay
    await record(result); // before the stream ends: a caller that saw its end and retried finds the record done
    return result;
  } catch (e) {
    const err = e instanceof ServiceError ? { type: e.type, message: e.message, ...e.extra } : { type: 'internal_error', message: 'Internal error' };
    if (!(e instanceof ServiceError)) req.log.error({ err: e }, 'sandbox stream failed');
    noteStreamError(req, err.type);
    sse.send({ error: { ...err, request_id: req.id } }, { event: 'error' });
    return null;
  } finally {
    sse.close();
  }
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
