import type { FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/shared';
import type { z } from 'zod';
import type { MessagesBody } from './schemas.ts';
import type { ChatSink, Chunk, StreamEnd } from './service.ts';
import { passThrough } from './pass-through.ts';
import type { LazySse } from '../../http/sse.ts';
import { ToolCallKeys, errorPayload, receiptData } from './stream.ts';

/**
 * Anthropic Messages over chat completions: the request is translated to a chat request (system, text,
 * images, tool_use and tool_result blocks, tools and tool_choice, stop_sequences, metadata.user_id), the
 * answer back to a Message, and a stream to the Messages event sequence (message_start, content_block_start,
 * ping, content_block_delta, content_block_stop, message_delta, message_stop). Errors keep our envelope
 * with Anthropic's top-level `"type": "error"` added, which is Anthropic's error shape.
 */
type Msgs = z.infer<typeof MessagesBody>;
type Block = Record<string, any>;
type ChatMsg = Record<string, unknown>;

function imageUrl(b: Block): string | null {
  const s = b.source as Block | undefined;
  if (s?.type === 'base64') return `data:${String(s.media_type)};base64,${String(s.data)}`;
  if (s?.type === 'url') return String(s.url);
  return null;
}

/** A block this gateway cannot carry to a chat upstream: refused, never dropped (the model would answer without it). */
function unsupported(param: string, what: string): ServiceError {
  return new ServiceError('invalid_request', `${param}: ${what} is not supported by this gateway`, { param });
}

/** Text blocks as one text; `param` names where, for a block of any other type. */
function blocksText(c: unknown, param: string): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return (c as Block[])
    .map((b, j) => {
      if (b?.type !== 'text') throw unsupported(`${param}[${j}]`, `a block of type "${String(b?.type)}" here`);
      return String(b.text ?? '');
    })
    .join('');
}

/** A document block with a plain-text source, as text (its title first); other documents are refused. */
function documentText(b: Block, param: string): string {
  const s = b.source as Block | undefined;
  if (s?.type !== 'text' || typeof s.data !== 'string') throw unsupported(param, `a document whose source is "${String(s?.type)}" (only text sources)`);
  return typeof b.title === 'string' && b.title ? `${b.title}\n\n${s.data}` : s.data;
}

export function messagesToChat(b: Msgs): Record<string, unknown> {
  const messages: ChatMsg[] = [];
  const system = blocksText(b.system, 'system');
  if (system) messages.push({ role: 'system', content: system });
  for (const [i, m] of b.messages.entries()) {
    if (typeof m.content === 'string') {
      messages.push({ role: m.role, content: m.content });
      continue;
    }
    const blocks = m.content as Block[];
    if (m.role === 'assistant') {
      // Thinking blocks a client sends back go no further: a chat upstream takes no such thing.
      blocks.forEach((x, j) => {
        if (!['text', 'tool_use', 'thinking', 'redacted_thinking'].includes(x.type)) throw unsupported(`messages[${i}].content[${j}]`, `a block of type "${String(x.type)}" in an assistant turn`);
      });
      const text = blocks.filter((x) => x.type === 'text').map((x) => String(x.text ?? '')).join('');
      const toolCalls = blocks.filter((x) => x.type === 'tool_use').map((x) => ({ id: String(x.id), type: 'function', function: { name: String(x.name), arguments: JSON.stringify(x.input ?? {}) } }));
      messages.push({ role: 'assistant', content: text || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) });
      continue;
    }
    // Tool results answer the previous assistant turn, so they come first, as tool messages.
    blocks.forEach((x, j) => {
      if (x.type !== 'tool_result') return;
      const text = blocksText(x.content, `messages[${i}].content[${j}].content`);
      messages.push({ role: 'tool', tool_call_id: String(x.tool_use_id), content: x.is_error ? `Error: ${text}` : text });
    });
    const parts: Block[] = [];
    blocks.forEach((x, j) => {
      const param = `messages[${i}].content[${j}]`;
      if (x.type === 'text') parts.push({ type: 'text', text: String(x.text ?? '') });
      else if (x.type === 'document') parts.push({ type: 'text', text: documentText(x, param) });
      else if (x.type === 'image') {
        const url = imageUrl(x);
        if (!url) throw unsupported(param, `an image whose source is "${String((x.source as Block | undefined)?.type)}" (base64 or url)`);
        parts.push({ type: 'image_url', image_url: { url } });
      } else if (x.type !== 'tool_result') throw unsupported(param, `a block of type "${String(x.type)}"`);
    });
    if (parts.length) messages.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts });
  }
  const chat: Record<string, unknown> = { model: b.model, messages, max_tokens: b.max_tokens };
  if (b.temperature !== undefined) chat.temperature = b.temperature;
  if (b.top_p !== undefined) chat.top_p = b.top_p;
  if (b.top_k !== undefined) chat.top_k = b.top_k;
  if (b.stop_sequences?.length) chat.stop = b.stop_sequences;
  if (b.metadata?.user_id) chat.user = b.metadata.user_id;
  if (b.tools?.length) {
    chat.tools = b.tools.map((t) => ({ type: 'function', function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema ?? { type: 'object', properties: {} } } }));
  }
  if (b.tool_choice) {
    const c = b.tool_choice;
    chat.tool_choice = c.type === 'any' ? 'required' : c.type === 'tool' ? { type: 'function', function: { name: c.name } } : c.type;
  }
  return passThrough(b, chat, MESSAGES_FIELDS);
}

/**
 * Messages fields translated above, or Anthropic's own with no chat counterpart (extended thinking, its
 * service tiers, containers, MCP servers, context management, the version and beta fields some SDKs put in
 * the body, its output format and geography settings): every other field passes to the upstream
 * unchanged (seed, penalties, any OpenAI-shape field).
 */
const MESSAGES_FIELDS = new Set(['model', 'max_tokens', 'messages', 'system', 'stop_sequences', 'temperature', 'top_p', 'top_k', 'stream', 'tools', 'tool_choice', 'metadata', 'thinking', 'service_tier', 'container', 'mcp_servers', 'context_management', 'anthropic_version', 'anthropic_beta', 'output_format', 'output_config', 'inference_geo']);

const STOP: Record<string, string> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', function_call: 'tool_use', content_filter: 'refusal' };

/**
 * Anthropic's stop_reason and stop_sequence for a chat finish. A stop on one of the caller's stop_sequences
 * is told by the matched string the upstream gives beside finish_reason "stop" (vLLM's `stop_reason`,
 * SGLang's `matched_stop`); a refusal the upstream gave is `refusal`.
 */
export function stopOf(finish: string | null | undefined, choice: Block | undefined, stops: string[] | undefined, refused: boolean): { stop_reason: string; stop_sequence: string | null } {
  if (refused) return { stop_reason: 'refusal', stop_sequence: null };
  const matched = [choice?.stop_reason, choice?.matched_stop].find((m): m is string => typeof m === 'string' && !!stops?.includes(m));
  if (finish === 'stop' && matched !== undefined) return { stop_reason: 'stop_sequence', stop_sequence: matched };
  return { stop_reason: finish ? (STOP[finish] ?? 'end_turn') : 'end_turn', stop_sequence: null };
}
export const messageId = (requestId: string) => `msg_${requestId.replace(/^req_/, '')}`;

function parseArgs(s: unknown): unknown {
  try {
    return JSON.parse(String(s || '{}'));
  } catch {
    return {};
  }
}

export function chatToMessage(c: Record<string, any>, model: string, requestId: string, stops?: string[]): Record<string, unknown> {
  const choice = (c.choices?.[0] ?? {}) as Block;
  const msg = (choice.message ?? {}) as Block;
  const content: Block[] = [];
  if (typeof msg.content === 'string' && msg.content) content.push({ type: 'text', text: msg.content });
  // A refusal is the answer's text (Anthropic has no refusal block), with stop_reason "refusal".
  const refused = typeof msg.refusal === 'string' && msg.refusal.length > 0;
  if (refused) content.push({ type: 'text', text: msg.refusal });
  for (const t of (msg.tool_calls ?? []) as Block[]) content.push({ type: 'tool_use', id: String(t.id), name: String(t.function?.name), input: parseArgs(t.function?.arguments) });
  return {
    id: messageId(requestId),
    type: 'message',
    role: 'assistant',
    model,
    content,
    ...stopOf(choice.finish_reason, choice, stops, refused),
    usage: { input_tokens: c.usage?.prompt_tokens ?? 0, output_tokens: c.usage?.completion_tokens ?? 0 },
  };
}

/** Chat chunks to the Messages event sequence. */
export class MessagesSink implements ChatSink {
  private index = -1;
  private open: 'text' | 'tool' | null = null;
  private readonly tools = new Map<string, number>();
  private readonly toolKeys = new ToolCallKeys();
  private refused = false;
  private finished: Block | undefined;

  constructor(
    private readonly req: FastifyRequest,
    private readonly out: LazySse,
    private readonly model: string,
    private readonly inputEstimate: number,
    private readonly stops?: string[],
  ) {}

  get closed(): boolean {
    return this.out.closed;
  }

  private ev(type: string, body: Record<string, unknown> = {}): void {
    this.out.send({ type, ...body }, type);
  }

  begin(): void {
    this.ev('message_start', {
      message: { id: messageId(this.req.id), type: 'message', role: 'assistant', model: this.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: this.inputEstimate, output_tokens: 0 } },
    });
    this.ev('ping');
  }

  private closeBlock(): void {
    if (this.open) this.ev('content_block_stop', { index: this.index });
    this.open = null;
  }

  drained(): Promise<void> | null {
    return this.out.drained();
  }

  chunk(c: Chunk): void {
    const choice = c.choices?.find((x) => (x.index ?? 0) === 0);
    const d = (choice?.delta ?? {}) as Block;
    if (choice?.finish_reason) this.finished = choice as Block;
    if (typeof d.refusal === 'string' && d.refusal) this.refused = true;
    for (const text of [d.content, d.refusal]) {
      if (typeof text !== 'string' || !text) continue;
      if (this.open !== 'text') {
        this.closeBlock();
        this.index++;
        this.open = 'text';
        this.ev('content_block_start', { index: this.index, content_block: { type: 'text', text: '' } });
      }
      this.ev('content_block_delta', { index: this.index, delta: { type: 'text_delta', text } });
    }
    for (const t of (d.tool_calls ?? []) as Block[]) {
      const k = this.toolKeys.of(t);
      if (!this.tools.has(k)) {
        this.closeBlock();
        this.index++;
        this.open = 'tool';
        this.tools.set(k, this.index);
        this.ev('content_block_start', { index: this.index, content_block: { type: 'tool_use', id: String(t.id ?? `toolu_${this.index}`), name: String(t.function?.name ?? ''), input: {} } });
      }
      const args = t.function?.arguments;
      if (typeof args === 'string' && args) this.ev('content_block_delta', { index: this.tools.get(k), delta: { type: 'input_json_delta', partial_json: args } });
    }
  }

  end(e: StreamEnd): void {
    this.closeBlock();
    this.ev('message_delta', { delta: stopOf(e.finishReason, this.finished, this.stops, this.refused), usage: { input_tokens: e.usage.prompt_tokens, output_tokens: e.usage.completion_tokens } });
    this.ev('message_stop');
    this.out.send(receiptData(e.receipt), 'receipt');
  }

  fail(err: ServiceError, partial: StreamEnd | null): void {
    // The Anthropic SDK throws an APIError on `event: error`.
    this.out.send({ type: 'error', error: errorPayload(this.req, err) }, 'error');
    if (partial) this.out.send(receiptData(partial.receipt), 'receipt');
  }
}
