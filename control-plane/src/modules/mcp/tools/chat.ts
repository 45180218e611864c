import { z } from 'zod';
import { ServiceError, deliveredText, type SignedReceipt } from '@svc/shared';
import { assertModelAllowed } from '../../../http/key-bounds.ts';
import type { CallContext, ChatSink, Chunk, InferenceService, StreamEnd } from '../../inference/service.ts';
import { guardRequest, type RequestGuard } from '../../guardrails/enforce.ts';
import type { Mode } from '../../guardrails/scanner.ts';
import type { McpTool, ToolAnswer, ToolContext } from './registry.ts';

const Message = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string().max(1024 * 1024),
});

const ChatInput = z.object({
  model: z.string().min(1).max(256).describe('A chat model of the catalog (GET /v1/models).'),
  messages: z.array(Message).min(1).max(500).describe('The conversation, oldest first.'),
  max_tokens: z.number().int().min(1).max(1_000_000).optional().describe('Most tokens to generate; the model\'s bound when absent.'),
  temperature: z.number().min(0).max(2).optional(),
});

type Answer = { text: string; model: string; finishReason: string | null; usage: Record<string, number>; receipt: SignedReceipt };

/** Collects a streamed answer, sending each piece of text on as a progress notification. */
class ProgressSink implements ChatSink {
  closed = false;
  text = '';
  constructor(
    private readonly progress: (message: string) => void,
    private readonly done: (a: { end: StreamEnd } | { error: ServiceError }) => void,
  ) {}

  begin(): void {}

  chunk(c: Chunk): void {
    let piece = '';
    for (const choice of c.choices ?? []) piece += deliveredText(choice.delta);
    if (!piece) return;
    this.text += piece;
    this.progress(piece);
  }

  drained(): null {
    return null;
  }

  end(e: StreamEnd): void {
    this.closed = true;
    this.done({ end: e });
  }

  fail(err: ServiceError): void {
    this.closed = true;
    this.done({ error: err });
  }
}

/**
 * Chat with a catalog model through the same metered inference service as /v1/chat/completions: held,
 * settled on the real usage and receipted under the caller's key (route `POST /v1/mcp`). With a
 * progressToken the answer streams: each piece of text is a progress notification's message.
 */
export function chatTool(inference: InferenceService, guardrailsMode: Mode): McpTool<typeof ChatInput> {
  const context = (ctx: ToolContext, guard: RequestGuard | undefined): CallContext => ({
    requestId: ctx.requestId,
    runId: ctx.runId,
    route: ctx.route,
    resource: ctx.resource,
    endpoint: 'chat.completions',
    signal: ctx.signal,
    settleBehind: true,
    ...(guard ? { guard } : {}),
  });

  async function once(body: Record<string, unknown>, ctx: ToolContext, guard: RequestGuard | undefined): Promise<Answer> {
    const a = await inference.chat(ctx.principal, body, context(ctx, guard));
    const choice = (Array.isArray(a.body.choices) ? a.body.choices[0] : undefined) as { message?: unknown; finish_reason?: string | null } | undefined;
    const text = deliveredText(choice?.message);
    return { text, model: String(a.body.model ?? body.model), finishReason: choice?.finish_reason ?? null, usage: (a.body.usage ?? {}) as Record<string, number>, receipt: a.receipt };
  }

  function streamed(body: Record<string, unknown>, ctx: ToolContext, guard: RequestGuard | undefined, progress: (m: string) => void): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const sink = new ProgressSink(progress, (r) => {
        if ('error' in r) return reject(r.error);
        resolve({ text: sink.text, model: r.end.meta.model, finishReason: r.end.finishReason, usage: { ...r.end.usage }, receipt: r.end.receipt });
      });
      inference.chatStream(ctx.principal, body, context(ctx, guard), sink, { forwardUsage: false }).then(() => {
        if (!sink.closed) reject(new ServiceError('upstream_error', 'The model\'s answer ended before it finished'));
      }, reject);
    });
  }

  return {
    name: 'chat',
    title: 'Chat with a model',
    description: 'Chat with a model of the gateway\'s catalog. Metered per token under your key; the signed receipt\'s id is in the result\'s _meta.',
    inputSchema: ChatInput,
    annotations: { readOnlyHint: true, openWorldHint: true },
    streams: true,
    scope: 'inference',
    route: { method: 'POST', url: '/v1/chat/completions' },
    async run(args, ctx): Promise<ToolAnswer> {
      assertModelAllowed(ctx.principal, args.model); // a mandate's model allow list, as on /v1/chat/completions
      const body: Record<string, unknown> = { model: args.model, messages: args.messages };
      if (args.max_tokens !== undefined) body.max_tokens = args.max_tokens;
      if (args.temperature !== undefined) body.temperature = args.temperature;
      const guard = guardRequest(ctx.principal, 'chat.completions', body, guardrailsMode); // guardrails: the key's policy, as on a request of it
      const a = ctx.progress ? await streamed(body, ctx, guard, ctx.progress) : await once(body, ctx, guard);
      return {
        content: [{ type: 'text', text: a.text }],
        structuredContent: { model: a.model, content: a.text, finish_reason: a.finishReason, usage: a.usage },
        receipt: a.receipt,
      };
    },
  };
}
