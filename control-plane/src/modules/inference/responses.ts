import type { FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/shared';
import type { z } from 'zod';
import type { ResponsesBody } from './schemas.ts';
import type { ChatSink, ChatUsage, Chunk, StreamEnd } from './service.ts';
import { passThrough } from './pass-through.ts';
import type { LazySse } from '../../http/sse.ts';
import { ToolCallKeys, errorPayload, receiptData } from './stream.ts';

/**
 * OpenAI Responses over chat completions. Nothing is stored, so `previous_response_id` is refused (400) and
 * `store` is ignored. Input items (messages with input_text / output_text / input_image parts,
 * function_call and function_call_output) become chat messages; function tools become chat tools; the
 * answer becomes a Response with a message item and function_call items; a stream becomes the Responses
 * event sequence (response.created ... response.completed).
 */
type Resp = z.infer<typeof ResponsesBody>;
type Item = Record<string, any>;

function parts(content: unknown): unknown {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const out: Item[] = [];
  for (const p of content as Item[]) {
    if (p?.type === 'input_text' || p?.type === 'output_text' || p?.type === 'text') out.push({ type: 'text', text: String(p.text ?? '') });
    else if (p?.type === 'input_image' && typeof p.image_url === 'string') out.push({ type: 'image_url', image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) } });
    else if (p?.type === 'refusal') out.push({ type: 'text', text: String(p.refusal ?? '') });
    else throw new ServiceError('invalid_request', `input: content part type "${String(p?.type)}" is not supported by this gateway`, { param: 'input' });
  }
  return out.every((p) => p.type === 'text') ? out.map((p) => p.text).join('') : out;
}

export function responsesToChat(b: Resp): Record<string, unknown> {
  if (b.previous_response_id) {
    throw new ServiceError('invalid_request', 'previous_response_id: this gateway stores no responses; send the whole conversation in `input`', { param: 'previous_response_id' });
  }
  const messages: Item[] = [];
  if (b.instructions) messages.push({ role: 'system', content: b.instructions });
  if (typeof b.input === 'string') messages.push({ role: 'user', content: b.input });
  else {
    for (const it of b.input as Item[]) {
      const type = it.type ?? 'message';
      if (type === 'message') {
        const role = it.role === 'developer' ? 'system' : String(it.role ?? 'user');
        messages.push({ role, content: parts(it.content) });
      } else if (type === 'function_call') {
        const call = { id: String(it.call_id), type: 'function', function: { name: String(it.name), arguments: String(it.arguments ?? '{}') } };
        const last = messages.at(-1);
        if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) last.tool_calls.push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      } else if (type === 'function_call_output') {
        messages.push({ role: 'tool', tool_call_id: String(it.call_id), content: typeof it.output === 'string' ? it.output : JSON.stringify(it.output) });
      } else if (type === 'reasoning') {
        continue;
      } else {
        throw new ServiceError('invalid_request', `input: item type "${String(type)}" is not supported by this gateway`, { param: 'input' });
      }
    }
  }
  const chat: Record<string, unknown> = { model: b.model, messages };
  if (b.max_output_tokens != null) chat.max_tokens = b.max_output_tokens;
  if (b.temperature != null) chat.temperature = b.temperature;
  if (b.top_p != null) chat.top_p = b.top_p;
  if (b.tools?.length) {
    chat.tools = b.tools.map((t: Item, i: number) => {
      if (t.type !== 'function') throw new ServiceError('invalid_request', `tools[${i}]: only function tools are supported by this gateway`, { param: `tools[${i}]` });
      return { type: 'function', function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters ?? { type: 'object', properties: {} }, ...(t.strict != null ? { strict: t.strict } : {}) } };
    });
  }
  if (b.tool_choice !== undefined) {
    const c = b.tool_choice as string | Item;
    chat.tool_choice = typeof c === 'string' ? c : c.type === 'function' ? { type: 'function', function: { name: c.name } } : 'auto';
  }
  const text = (b as Item).text as Item | undefined;
  if (text?.format?.type === 'json_schema') chat.response_format = { type: 'json_schema', json_schema: { name: text.format.name, schema: text.format.schema, ...(text.format.strict != null ? { strict: text.format.strict } : {}) } };
  else if (text?.format?.type === 'json_object') chat.response_format = { type: 'json_object' };
  if ((b as Item).parallel_tool_calls != null) chat.parallel_tool_calls = (b as Item).parallel_tool_calls;
  if ((b as Item).user != null) chat.user = (b as Item).user;
  const reasoning = (b as Item).reasoning as Item | undefined;
  if (typeof reasoning?.effort === 'string') chat.reasoning_effort = reasoning.effort;
  if (typeof (b as Item).top_logprobs === 'number') Object.assign(chat, { logprobs: true, top_logprobs: (b as Item).top_logprobs });
  return passThrough(b, chat, RESPONSES_FIELDS);
}

/**
 * Responses fields translated above, or with no chat counterpart (nothing is stored, no prompt templates,
 * no background runs): every other field passes to the upstream unchanged (seed, penalties, service_tier...).
 */
const RESPONSES_FIELDS = new Set(['model', 'input', 'instructions', 'max_output_tokens', 'temperature', 'top_p', 'stream', 'stream_options', 'previous_response_id', 'tools', 'tool_choice', 'text', 'parallel_tool_calls', 'user', 'reasoning', 'top_logprobs', 'store', 'metadata', 'include', 'truncation', 'background', 'prompt', 'conversation', 'max_tool_calls']);


const ids = (requestId: string) => {
  const s = requestId.replace(/^req_/, '');
  return { resp: `resp_${s}`, msg: `msg_${s}` };
};

function usageOf(u: ChatUsage | undefined) {
  const i = u?.prompt_tokens ?? 0;
  const o = u?.completion_tokens ?? 0;
  return { input_tokens: i, input_tokens_details: { cached_tokens: 0 }, output_tokens: o, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: i + o };
}

function responseShell(b: Resp, requestId: string, model: string, created: number) {
  return {
    id: ids(requestId).resp,
    object: 'response',
    created_at: created,
    status: 'in_progress',
    error: null,
    incomplete_details: null as null | { reason: string },
    instructions: b.instructions ?? null,
    max_output_tokens: b.max_output_tokens ?? null,
    model,
    output: [] as Item[],
    parallel_tool_calls: (b as Item).parallel_tool_calls ?? true,
    previous_response_id: null,
    temperature: b.temperature ?? null,
    tool_choice: b.tool_choice ?? 'auto',
    tools: b.tools ?? [],
    top_p: b.top_p ?? null,
    text: (b as Item).text ?? { format: { type: 'text' } },
    truncation: 'disabled',
    store: false,
    metadata: (b as Item).metadata ?? {},
    usage: null as null | ReturnType<typeof usageOf>,
  };
}

const finish = (r: ReturnType<typeof responseShell>, reason: string | null, usage: ChatUsage) => {
  r.status = reason === 'length' ? 'incomplete' : 'completed';
  r.incomplete_details = reason === 'length' ? { reason: 'max_output_tokens' } : null;
  r.usage = usageOf(usage);
  return r;
};

export function chatToResponse(b: Resp, c: Record<string, any>, model: string, requestId: string) {
  const choice = (c.choices?.[0] ?? {}) as Item;
  const msg = (choice.message ?? {}) as Item;
  const r = responseShell(b, requestId, model, typeof c.created === 'number' ? c.created : Math.floor(Date.now() / 1000));
  const parts: Item[] = [];
  if (typeof msg.content === 'string') parts.push({ type: 'output_text', text: msg.content, annotations: [], logprobs: [] });
  if (typeof msg.refusal === 'string' && msg.refusal) parts.push({ type: 'refusal', refusal: msg.refusal });
  if (parts.length) r.output.push({ type: 'message', id: ids(requestId).msg, status: 'completed', role: 'assistant', content: parts });
  for (const t of (msg.tool_calls ?? []) as Item[]) {
    r.output.push({ type: 'function_call', id: `fc_${String(t.id)}`, call_id: String(t.id), name: String(t.function?.name), arguments: String(t.function?.arguments ?? ''), status: 'completed' });
  }
  return finish(r, choice.finish_reason ?? null, c.usage as ChatUsage);
}

const partOf = (kind: 'output_text' | 'refusal', text: string): Item =>
  kind === 'output_text' ? { type: 'output_text', text, annotations: [], logprobs: [] } : { type: 'refusal', refusal: text };

/** Chat chunks to the Responses streaming events. */
export class ResponsesSink implements ChatSink {
  private seq = 0;
  private readonly r: ReturnType<typeof responseShell>;
  /** The message item (its output index) and its content parts in arrival order: text, then a refusal, or either. */
  private msg: { index: number; parts: Array<{ kind: 'output_text' | 'refusal'; text: string }> } | null = null;
  private readonly calls = new Map<string, { index: number; item: Item }>();
  private readonly toolKeys = new ToolCallKeys();

  constructor(
    private readonly req: FastifyRequest,
    private readonly out: LazySse,
    body: Resp,
    model: string,
  ) {
    this.r = responseShell(body, req.id, model, Math.floor(Date.now() / 1000));
  }

  get closed(): boolean {
    return this.out.closed;
  }

  private ev(type: string, body: Record<string, unknown>): void {
    this.out.send({ type, sequence_number: this.seq++, ...body }, type);
  }

  private snapshot() {
    return structuredClone(this.r);
  }

  begin(): void {
    this.ev('response.created', { response: this.snapshot() });
    this.ev('response.in_progress', { response: this.snapshot() });
  }

  drained(): Promise<void> | null {
    return this.out.drained();
  }

  chunk(c: Chunk): void {
    const choice = c.choices?.find((x) => (x.index ?? 0) === 0);
    const d = (choice?.delta ?? {}) as Item;
    if (typeof d.content === 'string' && d.content) this.part('output_text', d.content);
    if (typeof d.refusal === 'string' && d.refusal) this.part('refusal', d.refusal);
    for (const t of (d.tool_calls ?? []) as Item[]) {
      const k = this.toolKeys.of(t);
      let call = this.calls.get(k);
      if (!call) {
        const callId = String(t.id ?? `call_${this.calls.size}`);
        const item = { type: 'function_call', id: `fc_${callId}`, call_id: callId, name: String(t.function?.name ?? ''), arguments: '', status: 'in_progress' };
        call = { index: this.r.output.length, item };
        this.calls.set(k, call);
        this.r.output.push(item);
        this.ev('response.output_item.added', { output_index: call.index, item: structuredClone(item) });
      }
      const args = t.function?.arguments;
      if (typeof args === 'string' && args) {
        call.item.arguments += args;
        this.ev('response.function_call_arguments.delta', { item_id: call.item.id, output_index: call.index, delta: args });
      }
    }
  }

  /** A delta of the message's text or refusal: the item and the part are added first when new. */
  private part(kind: 'output_text' | 'refusal', delta: string): void {
    const id = ids(this.req.id).msg;
    if (!this.msg) {
      this.msg = { index: this.r.output.length, parts: [] };
      const item = { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] as Item[] };
      this.r.output.push(item);
      this.ev('response.output_item.added', { output_index: this.msg.index, item: structuredClone(item) });
    }
    const m = this.msg;
    let at = m.parts.findIndex((p) => p.kind === kind);
    if (at < 0) {
      at = m.parts.push({ kind, text: '' }) - 1;
      this.ev('response.content_part.added', { item_id: id, output_index: m.index, content_index: at, part: partOf(kind, '') });
    }
    m.parts[at]!.text += delta;
    if (kind === 'output_text') this.ev('response.output_text.delta', { item_id: id, output_index: m.index, content_index: at, delta, logprobs: [] });
    else this.ev('response.refusal.delta', { item_id: id, output_index: m.index, content_index: at, delta });
  }

  end(e: StreamEnd): void {
    if (this.msg) {
      const m = this.msg;
      const id = ids(this.req.id).msg;
      const parts = m.parts.map((p) => partOf(p.kind, p.text));
      const item = { type: 'message', id, status: 'completed', role: 'assistant', content: parts };
      this.r.output[m.index] = item;
      m.parts.forEach((p, i) => {
        if (p.kind === 'output_text') this.ev('response.output_text.done', { item_id: id, output_index: m.index, content_index: i, text: p.text, logprobs: [] });
        else this.ev('response.refusal.done', { item_id: id, output_index: m.index, content_index: i, refusal: p.text });
        this.ev('response.content_part.done', { item_id: id, output_index: m.index, content_index: i, part: parts[i] });
      });
      this.ev('response.output_item.done', { output_index: m.index, item });
    }
    for (const call of this.calls.values()) {
      call.item.status = 'completed';
      this.ev('response.function_call_arguments.done', { item_id: call.item.id, output_index: call.index, arguments: call.item.arguments });
      this.ev('response.output_item.done', { output_index: call.index, item: structuredClone(call.item) });
    }
    finish(this.r, e.finishReason, e.usage);
    this.ev(this.r.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: this.snapshot() });
    this.receipt(e);
  }

  fail(err: ServiceError, partial: StreamEnd | null): void {
    const p = errorPayload(this.req, err);
    // `error` makes the openai SDK throw; code/message are the Responses error event's own fields.
    this.out.send({ type: 'error', sequence_number: this.seq++, code: p.type, message: p.message, param: null, error: p }, 'error');
    if (partial) this.receipt(partial);
  }

  /**
   * The receipt event's data is typed `keepalive`: the Responses protocol's event that every client must
   * skip (the openai SDK's ResponseStream throws on any type it does not know).
   */
  private receipt(e: StreamEnd): void {
    this.out.send({ ...receiptData(e.receipt), type: 'keepalive', sequence_number: this.seq++ }, 'receipt');
  }
}
