import type { FastifyReply, FastifyRequest } from 'fastify';
import { RECEIPT_HEADERS, ServiceError, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { Idempotency } from '../../http/idempotency.ts';
import { receiptEvent, setReceiptHeaders } from '../../http/receipt-headers.ts';
import { SseStream } from '../../http/sse.ts';
import type { ExecContext } from './executor.ts';
import type { RunResult } from './schemas.ts';

type Exec = (ctx: Pick<ExecContext, 'onOutput' | 'signal'>) => Promise<{ result: RunResult; receipt: SignedReceipt }>;

/**
 * Answers a metered sandbox execution: JSON with receipt headers, or SSE ending in the receipt event.
 * Returns what was answered (for an Idempotency-Key record); null when a stream ended in an error.
 */
export async function respondExec(req: FastifyRequest, reply: FastifyReply, stream: boolean, exec: Exec): Promise<RunResult | null> {
  if (!stream) {
    const { result, receipt } = await exec({});
    setReceiptHeaders(reply, receipt);
    await reply.code(200).send(result);
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
    return result;
  } catch (e) {
    const err = e instanceof ServiceError ? { type: e.type, message: e.message, ...e.extra } : { type: 'internal_error', message: 'Internal error' };
    if (!(e instanceof ServiceError)) req.log.error({ err: e }, 'sandbox stream failed');
    sse.send({ error: { ...err, request_id: req.id } }, { event: 'error' });
    return null;
  } finally {
    sse.close();
  }
}

/**
 * Wraps a handler in Idempotency-Key semantics when the header is present. `run` answers the request and
 * returns the body it answered with (null if it failed); `store` shapes what is kept for a replay.
 */
export async function withIdempotency<T>(
  idem: Idempotency,
  req: FastifyRequest,
  reply: FastifyReply,
  route: string,
  run: () => Promise<T | null>,
  store: (sent: T) => unknown = (sent) => sent,
): Promise<void> {
  const key = req.headers['idempotency-key'];
  if (key === undefined) {
    await run();
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
  try {
    const sent = await run();
    if (sent === null) {
      await idem.abandon(accountId, route, key);
      return;
    }
    const headers: Record<string, string> = {};
    for (const h of Object.values(RECEIPT_HEADERS)) {
      const v = reply.getHeader(h);
      if (typeof v === 'string') headers[h] = v;
    }
    await idem.complete(accountId, route, key, reply.statusCode, store(sent), headers);
  } catch (e) {
    await idem.abandon(accountId, route, key);
    throw e;
  }
}
