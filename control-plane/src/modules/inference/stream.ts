import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, type SignedReceipt } from '@svc/shared';
import { receiptEvent } from '../../http/receipt-headers.ts';
import { noteStreamError } from '../../http/request-log.ts';
import type { LazySse } from '../../http/sse.ts';
import type { ChatSink, Chunk, StreamEnd } from './service.ts';

/**
 * The final event of every inference stream is the signed receipt, as `event: receipt` with
 * `{"type":"receipt", id, receipt, canonical, hash, signature, signer}` (the fields of the x-svc-* headers).
 * It is sent where each official SDK tolerates it:
 * - chat completions: after `data: [DONE]`. The `openai` SDK's stream parser skips every frame after
 *   [DONE] (a named event before it would be parsed and yielded as a chunk);
 * - messages: after `message_stop`. The `@anthropic-ai/sdk` stream yields unknown event types to raw
 *   iterators (Anthropic's versioning policy says clients must ignore unknown events) and its
 *   MessageStream accumulator ignores them;
 * - responses: after `response.completed`, with `"type": "keepalive"` in its data: the openai ResponseStream
 *   throws on event types it does not know, and `keepalive` is the Responses event every client skips.
 * The stream's response headers carry `x-svc-receipt-id` (the request id) so the receipt can also be
 * fetched later with GET /v1/receipts/{id}.
 */
export const receiptData = (r: SignedReceipt) => ({ type: 'receipt', ...receiptEvent(r) });

/** The caller went away: aborts when the response closes before it was ended. */
export function callerSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableEnded) ac.abort(new Error('caller went away'));
  });
  return ac.signal;
}

/** The error event of a stream that failed after it began (its request's log line records how it ended). */
export function errorPayload(req: FastifyRequest, e: unknown): { type: string; message: string; [k: string]: unknown } {
  noteStreamError(req, e instanceof ServiceError ? e.type : 'internal_error');
  if (e instanceof ServiceError) return { type: e.type, message: e.message, ...e.extra, request_id: req.id };
  req.log.error({ err: e }, 'inference stream failed');
  return { type: 'internal_error', message: 'Internal error; quote the request_id when reporting it', request_id: req.id };
}

/** OpenAI chat completion chunks, `[DONE]`, then the receipt. */
export class ChatCompletionSink implements ChatSink {
  constructor(
    private readonly req: FastifyRequest,
    private readonly out: LazySse,
    private readonly wantUsage: boolean,
  ) {}

  get closed(): boolean {
    return this.out.closed;
  }

  begin(): void {
    this.out.open();
  }

  chunk(c: Chunk): void {
    this.out.send(c);
  }

  drained(): Promise<void> | null {
    return this.out.drained();
  }

  end(e: StreamEnd): void {
    // The caller asked for usage and the upstream sent none: the counted usage, in the OpenAI usage chunk.
    if (this.wantUsage && !e.usageDelivered) this.out.send({ id: e.meta.id, object: 'chat.completion.chunk', created: e.meta.created, model: e.meta.model, choices: [], usage: e.usage });
    this.out.send('[DONE]');
    this.out.send(receiptData(e.receipt), 'receipt');
  }

  fail(err: ServiceError, partial: StreamEnd | null): void {
    // The openai SDK throws an APIError on a data frame with an `error` member.
    this.out.send({ error: errorPayload(this.req, err) });
    if (partial) this.out.send(receiptData(partial.receipt), 'receipt');
  }
}

/** Runs a streamed call; errors thrown before the stream opened propagate (status and envelope as usual). */
export async function runStream(reply: FastifyReply, out: LazySse, fail: (e: unknown) => void, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (e) {
    if (!out.opened) throw e;
    fail(e);
  } finally {
    out.close();
  }
  if (!out.opened) {
    // The caller left before anything was sent: nothing to answer.
    reply.hijack();
    reply.raw.end();
  }
}

/**
 * Which tool call of a stream a tool_calls delta continues: its `index`, as OpenAI sends it; else a new call
 * for a new `id` (servers that send each call whole, without an index); else the call before it.
 */
export class ToolCallKeys {
  private last: string | null = null;
  /** The key of each call id seen, so a later delta naming only its id continues the same call. */
  private readonly ids = new Map<string, string>();

  of(t: { index?: unknown; id?: unknown }): string {
    const id = typeof t.id === 'string' && t.id ? t.id : null;
    const k = typeof t.index === 'number' ? `i${t.index}` : id ? (this.ids.get(id) ?? `id ${id}`) : (this.last ?? 'i0');
    if (id && !this.ids.has(id)) this.ids.set(id, k);
    this.last = k;
    return k;
  }
}
