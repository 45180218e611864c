import { z } from 'zod';

/**
 * Inference over the agent channel. The control plane dispatches `inference.chat` and
 * `inference.embeddings` jobs to inference nodes; the agent proxies them to a local OpenAI-compatible
 * server (Ollama, vLLM, llama.cpp) and streams the server's SSE `data:` payloads back as `data` outputs,
 * one output per SSE event (the JSON text of a chunk, or `[DONE]`).
 */
export const INFERENCE_JOBS = { chat: 'inference.chat', embeddings: 'inference.embeddings' } as const;

export const InferenceJobPayload = z.object({
  /** The public model id the caller asked for. */
  model: z.string().min(1).max(200),
  /** node id -> that node's local model name (from its enrolled `model_map`); the agent picks its own entry. */
  local_models: z.record(z.string(), z.string()).default({}),
  /** The OpenAI-shape request body; the agent replaces `model` with the local name. */
  body: z.record(z.string(), z.unknown()),
  stream: z.boolean().default(false),
});
export type InferenceJobPayload = z.infer<typeof InferenceJobPayload>;

export const TokenUsage = z
  .object({ prompt_tokens: z.number().int().min(0).optional(), completion_tokens: z.number().int().min(0).optional(), total_tokens: z.number().int().min(0).optional() })
  .loose();
export type TokenUsage = z.infer<typeof TokenUsage>;

/**
 * What an inference job resolves with. `status` is the local server's HTTP status (0: it could not be
 * reached). Non-streamed answers carry the server's JSON `body`; an error carries the server's error body.
 */
export const InferenceJobResult = z.object({
  status: z.number().int().min(0).max(999),
  body: z.unknown().optional(),
  error: z.string().max(2000).optional(),
  usage: TokenUsage.nullable().optional(),
  /** A failure another node would repeat (the answer is too large to send back): not tried elsewhere, and `error` is the caller's message. */
  final: z.boolean().optional(),
});
export type InferenceJobResult = z.infer<typeof InferenceJobResult>;

/**
 * The local token estimator, used when an upstream reports no usage and for the worst-case hold:
 * about 4 characters per token, rounded up (OpenAI's rule of thumb for English text).
 */
export const CHARS_PER_TOKEN = 4;
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Text a chat completion chunk or message delivers: content, refusal, reasoning and tool-call arguments. */
export function deliveredText(delta: unknown): string {
  if (!delta || typeof delta !== 'object') return '';
  const d = delta as Record<string, unknown>;
  let s = '';
  for (const k of ['content', 'refusal', 'reasoning_content', 'reasoning']) if (typeof d[k] === 'string') s += d[k];
  if (Array.isArray(d.tool_calls)) {
    for (const c of d.tool_calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) {
      if (typeof c?.function?.name === 'string') s += c.function.name;
      if (typeof c?.function?.arguments === 'string') s += c.function.arguments;
    }
  }
  return s;
}

export interface SseFrame {
  event: string | null;
  data: string;
}

/**
 * A frame's payload as an OpenAI-shape stream carries it: an `error` event (see SseParser) becomes the
 * `{"error": ...}` chunk OpenAI-compatible servers send inline, so every consumer handles one error form.
 */
export function frameData(f: SseFrame): string {
  if (f.event !== 'error') return f.data;
  let error: unknown;
  try {
    error = JSON.parse(f.data);
  } catch {
    error = { message: f.data || 'the upstream reported an error' };
  }
  const inner = error && typeof error === 'object' && 'error' in error ? (error as { error: unknown }).error : error;
  return JSON.stringify({ error: inner && typeof inner === 'object' ? inner : { message: String(inner) } });
}

/**
 * An incremental server-sent-events parser: push decoded text, get complete frames (comments dropped). An
 * `error:` line, which is not an SSE field (llama.cpp's server writes its errors so, then `data: [DONE]`),
 * makes its block a frame of event `error` with that line as its data, rather than being ignored.
 */
export class SseParser {
  private buf = '';
  private event: string | null = null;
  private data: string[] = [];

  push(text: string): SseFrame[] {
    this.buf += text;
    const out: SseFrame[] = [];
    let i: number;
    while ((i = this.buf.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + (this.buf[i] === '\r' && this.buf[i + 1] === '\n' ? 2 : 1));
      if (line === '') {
        if (this.data.length || this.event) out.push({ event: this.event, data: this.data.join('\n') });
        this.event = null;
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c === -1 ? line : line.slice(0, c);
      const value = c === -1 ? '' : line.slice(line[c + 1] === ' ' ? c + 2 : c + 1);
      if (field === 'data') this.data.push(value);
      else if (field === 'event') this.event = value;
      else if (field === 'error') {
        this.event = 'error';
        this.data.push(value);
      }
    }
    return out;
  }

  /** A final frame not followed by a blank line (a server that closed right after its last data line). */
  end(): SseFrame[] {
    const out = this.push('\n\n');
    this.buf = '';
    return out;
  }
}
