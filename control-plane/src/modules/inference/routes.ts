import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { SOURCE_SET_HEADER, type ReceiptContext } from '@svc/shared';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { callerGone } from '../../http/caller-signal.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { MessagesSink, chatToMessage, messagesToChat } from './anthropic.ts';
import { ResponsesSink, chatToResponse, responsesToChat } from './responses.ts';
import { AnthropicMessage, ChatBody, ChatCompletion, Embeddings, EmbeddingsBody, InferenceHeaders, MessagesBody, ModelList, ResponseObject, ResponsesBody } from './schemas.ts';
import type { CallContext, Endpoint, InferenceService } from './service.ts';
import { LazySse } from '../../http/sse.ts';
import { ChatCompletionSink, errorPayload, runStream } from './stream.ts';
import { estimateChatInput } from './tokens.ts';
import { REQUEST_BODY_LIMIT } from './schemas.ts';
import { guardOf, guardInference } from '../guardrails/enforce.ts'; // guardrails
import type { Mode } from '../guardrails/scanner.ts'; // guardrails

const billable = { auth: 'key', scope: 'inference', billable: true } as const;

/** The sources module's lookup of a set the caller cites (one primary-key read; a refusal is a ServiceError). */
export interface SourceCitations {
  citation(accountId: string, setId: string): Promise<ReceiptContext>;
}

/** The receipt context of each request that cites a source set, resolved by `citeSourceSet` before the handler runs. */
const cited = new WeakMap<FastifyRequest, ReceiptContext>();

/**
 * The preHandler of every inference route: a request with the X-Svc-Source-Set header has its set looked up
 * (the caller's own, live) before the handler places any hold, so a refusal charges nothing. A callback hook:
 * a request without the header costs one header read, no promise and no database read.
 */
function citeSourceSet(sources: SourceCitations) {
  return (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const setId = req.headers[SOURCE_SET_HEADER];
    if (typeof setId !== 'string') return done();
    sources.citation(requireKey(req).accountId, setId).then(
      (c) => {
        cited.set(req, c);
        done();
      },
      (e: Error) => done(e),
    );
  };
}

/** The absolute URL of each route, for 402 terms (a URL parsed per request cost measurable CPU at high rates). */
const resources = new Map<string, string>();
function context(req: FastifyRequest, reply: FastifyReply, endpoint: Endpoint, path: string, publicUrl: URL): CallContext {
  const key = `${publicUrl.href} ${path}`;
  let resource = resources.get(key);
  if (resource === undefined) resources.set(key, (resource = new URL(path, publicUrl).toString()));
  return { requestId: req.id, runId: runIdOf(req), route: `POST ${path}`, resource, endpoint, signal: callerGone(reply.raw), settleBehind: true, receiptContext: cited.get(req), guard: guardOf(req) };
}

/**
 * JSON with the receipt headers; a string payload skips the response serializer (the upstream's fields pass
 * through). A provider's answer that nothing changed goes out as its text came (`text`), not written again.
 */
function sendJson(reply: FastifyReply, r: { body: unknown; text?: string; receipt: Parameters<typeof setReceiptHeaders>[1] }) {
  setReceiptHeaders(reply, r.receipt);
  return reply.code(200).type('application/json; charset=utf-8').send(r.text ?? JSON.stringify(r.body));
}

/** Anthropic's error shape is our envelope plus `"type": "error"` at the top. */
async function anthropicErrors(_req: FastifyRequest, reply: FastifyReply, payload: unknown) {
  if (reply.statusCode < 400 || typeof payload !== 'string' || !payload.startsWith('{"error"')) return payload;
  return `{"type":"error",${payload.slice(1)}`;
}

export function inferenceRoutes(app: FastifyInstance, d: { service: InferenceService; publicUrl: URL; stallMs: number; sources: SourceCitations; guardrailsMode: Mode }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['inference'];
  const svc = d.service;
  const preHandler = [citeSourceSet(d.sources), guardInference(d.guardrailsMode)]; // guardrails: a key's policy, checked and its input scanned before the handler

  r.get(
    '/v1/models',
    { config: { auth: 'public' }, schema: { tags, summary: 'Model catalog with per-million-token prices (micro-USD); only models a provider or an eligible node serves', response: { 200: ModelList } } },
    async () => ({ object: 'list' as const, data: await svc.catalog.list() }),
  );

  r.post(
    '/v1/chat/completions',
    { config: billable, bodyLimit: REQUEST_BODY_LIMIT, preHandler, schema: { tags, summary: 'OpenAI-shape chat completion; stream: true answers with SSE ending in the receipt event', headers: InferenceHeaders, body: ChatBody, response: { 200: ChatCompletion } } },
    async (req, reply) => {
      const p = requireKey(req);
      const ctx = context(req, reply, 'chat.completions', '/v1/chat/completions', d.publicUrl);
      if (!req.body.stream) return sendJson(reply, await svc.chat(p, req.body, ctx));
      const wantUsage = req.body.stream_options?.include_usage === true;
      const out = new LazySse(reply, ctx.signal, d.stallMs);
      const sink = new ChatCompletionSink(req, out, wantUsage);
      await runStream(reply, out, (e) => out.send({ error: errorPayload(req, e) }), () => svc.chatStream(p, req.body, ctx, sink, { forwardUsage: wantUsage }));
    },
  );

  r.post(
    '/v1/embeddings',
    { config: billable, bodyLimit: REQUEST_BODY_LIMIT, preHandler, schema: { tags, summary: 'OpenAI-shape embeddings', headers: InferenceHeaders, body: EmbeddingsBody, response: { 200: Embeddings } } },
    async (req, reply) => sendJson(reply, await svc.embeddings(requireKey(req), req.body, context(req, reply, 'embeddings', '/v1/embeddings', d.publicUrl))),
  );

  r.post(
    '/v1/messages',
    {
      config: billable,
      bodyLimit: REQUEST_BODY_LIMIT,
      preHandler,
      onSend: anthropicErrors,
      schema: { tags, summary: 'Anthropic Messages shape over chat completions; stream: true answers with the Messages event sequence ending in the receipt event', headers: InferenceHeaders, body: MessagesBody, response: { 200: AnthropicMessage } },
    },
    async (req, reply) => {
      const p = requireKey(req);
      const ctx = context(req, reply, 'messages', '/v1/messages', d.publicUrl);
      const chat = messagesToChat(req.body);
      if (!req.body.stream) {
        const res = await svc.chat(p, chat, ctx);
        return sendJson(reply, { body: chatToMessage(res.body, req.body.model, req.id, req.body.stop_sequences), receipt: res.receipt });
      }
      const out = new LazySse(reply, ctx.signal, d.stallMs);
      const sink = new MessagesSink(req, out, req.body.model, estimateChatInput(chat), req.body.stop_sequences);
      await runStream(reply, out, (e) => out.send({ type: 'error', error: errorPayload(req, e) }, 'error'), () => svc.chatStream(p, chat, ctx, sink, { forwardUsage: false }));
    },
  );

  r.post(
    '/v1/responses',
    { config: billable, bodyLimit: REQUEST_BODY_LIMIT, preHandler, schema: { tags, summary: 'OpenAI Responses shape over chat completions; previous_response_id is refused (nothing is stored)', headers: InferenceHeaders, body: ResponsesBody, response: { 200: ResponseObject } } },
    async (req, reply) => {
      const p = requireKey(req);
      const chat = responsesToChat(req.body);
      const ctx = context(req, reply, 'responses', '/v1/responses', d.publicUrl);
      if (!req.body.stream) {
        const res = await svc.chat(p, chat, ctx);
        return sendJson(reply, { body: chatToResponse(req.body, res.body, req.body.model, req.id), receipt: res.receipt });
      }
      const out = new LazySse(reply, ctx.signal, d.stallMs);
      const sink = new ResponsesSink(req, out, req.body, req.body.model);
      await runStream(reply, out, (e) => {
        const p2 = errorPayload(req, e);
        out.send({ type: 'error', code: p2.type, message: p2.message, param: null, error: p2 }, 'error');
      }, () => svc.chatStream(p, chat, ctx, sink, { forwardUsage: false }));
    },
  );
}
