import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ServiceError, type Clock } from '@svc/shared';
import type { MediaConfig } from '../../config/media.ts';
import { callerSignal } from '../inference/stream.ts';
import type { InferenceService } from '../inference/service.ts';
import { AssistantBody, AssistantReply } from './schemas.ts';

/**
 * The rate-limit key of a client address: an IPv4 address (also IPv4-mapped IPv6) as is, an IPv6 address
 * by its /64, the block one host is routinely given (counting each address of it would let one host
 * take a fresh window per address).
 */
export function clientKey(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (isIP(ip) !== 6) return ip;
  // Written out as eight groups: a dotted IPv4 tail is two of them, `::` the zero groups left out.
  const bare = ip.split('%')[0]!.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) => `${((+a << 8) | +b).toString(16)}:${((+c << 8) | +d).toString(16)}`);
  const [head = '', tail] = bare.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/**
 * A fixed-window request counter per client key, in memory (per process). Windows are measured on the
 * injected clock. Keys are kept in the order their windows began (a new window moves its key to the
 * end), so stale ones are dropped from the front in constant time per request; past `maxKeys` live
 * windows the oldest is dropped, so memory stays bounded however many addresses call.
 */
export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
    private readonly maxKeys = 100_000,
  ) {}

  /** Live windows held (tests, metrics). */
  get size(): number {
    return this.windows.size;
  }

  /** Counts one request; throws 429 rate_limited with retry_after (seconds) when the window is full. */
  take(key: string): void {
    const now = this.clock.now().getTime();
    for (const [k, w] of this.windows) {
      if (now - w.start < this.windowMs) break;
      this.windows.delete(k);
    }
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.windowMs) {
      this.windows.delete(key);
      if (this.windows.size >= this.maxKeys) this.windows.delete(this.windows.keys().next().value!);
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    if (w.count >= this.limit) {
      const retry = Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000));
      throw new ServiceError('rate_limited', `The keyless assistant takes ${this.limit} requests per ${this.windowMs / 1000} s per client; retry in ${retry} s`, { retry_after: retry });
    }
    w.count++;
  }
}

const MAX_TOTAL_CHARS = 32_000;

/**
 * POST /v1/assistant: keyless, answered by SVC_ASSISTANT_MODEL through the inference backends without
 * metering. It persists nothing and mints no receipt; it is rate limited per client address. Without a
 * configured model the route is unmounted: it answers 404 as an unknown route does, and stays in the OpenAPI
 * document like every route behind a deployment flag.
 */
export function assistantRoutes(app: FastifyInstance, d: { inference: InferenceService; config: MediaConfig['assistant']; clock: Clock }): void {
  const model = d.config.model ?? '';
  const limiter = new RateLimiter(d.config.rateLimit, d.config.rateWindowSeconds * 1000, d.clock);
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post(
    '/v1/assistant',
    {
      config: { auth: 'public', unmounted: !model },
      schema: {
        tags: ['media'],
        summary: `Keyless assistant: persists nothing, mints no receipt; ${d.config.rateLimit} requests per ${d.config.rateWindowSeconds} s per client (429 with Retry-After beyond); 404 where no assistant model is configured`,
        body: AssistantBody,
        response: { 200: AssistantReply },
      },
    },
    async (req, reply) => {
      const total = req.body.messages.reduce((n, m) => n + m.content.length, 0);
      if (total > MAX_TOTAL_CHARS) throw new ServiceError('invalid_request', `messages: at most ${MAX_TOTAL_CHARS} characters in all`, { param: 'messages' });
      limiter.take(clientKey(req.ip));
      const messages = [...(d.config.systemPrompt ? [{ role: 'system', content: d.config.systemPrompt }] : []), ...req.body.messages];
      const maxTokens = Math.min(req.body.max_tokens ?? d.config.maxTokens, d.config.maxTokens);
      const answer = await d.inference.completeUnmetered({ model, messages, max_tokens: maxTokens, stream: false }, callerSignal(reply));
      const choice = (Array.isArray(answer.choices) ? answer.choices[0] : undefined) as { message?: { content?: unknown }; finish_reason?: unknown } | undefined;
      const content = typeof choice?.message?.content === 'string' ? choice.message.content : null;
      if (content === null) throw new ServiceError('upstream_error', 'The assistant model answered no text');
      return { object: 'assistant.reply' as const, model, message: { role: 'assistant' as const, content }, finish_reason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null };
    },
  );
}
