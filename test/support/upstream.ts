import { createServer, type IncomingMessage, type Server } from 'node:http';
import { readBody } from './http.ts';

/**
 * A real OpenAI-compatible server on loopback, standing in for a provider or a node's local server
 * (Ollama, vLLM). It answers POST /v1/chat/completions (streamed and not, with usage) and
 * POST /v1/embeddings deterministically, records every request, and has switches for the failure cases.
 *
 * The answer is `reply` split into word chunks (truncated to max_tokens words, finish_reason "length").
 * Its usage is deliberately not the gateway's estimate: prompt_tokens = messages + words of their
 * contents; completion_tokens = chunks sent.
 */
export interface UpstreamSwitches {
  /** Streams carry no usage chunk even when stream_options.include_usage is set. */
  noUsage: boolean;
  /** Every call answers this HTTP status with an error body (500: a server error; 400: a bad request). */
  failWith: number | null;
  /** Delay before answering at all. */
  delayMs: number;
  /** Answers nothing until this settles (a call held as long as the test needs, whatever the machine's speed). */
  holdUntil: Promise<unknown> | null;
  /** Delay between streamed chunks. */
  chunkDelayMs: number;
  /** A stream sends this many pieces of the reply, then waits for `until` before the rest. */
  holdAfter: { pieces: number; until: Promise<unknown> } | null;
  reply: string;
  /**
   * Every call answers exactly this (status 200 unless given): the shapes real servers send when they fail
   * without saying so in the status, such as llama.cpp's `error:` SSE line or a JSON error under a 200.
   */
  raw: { status?: number; type: string; text: string; headers?: Record<string, string> } | null;
  /**
   * The one field the bound is read from: `max_tokens` as Ollama (max_completion_tokens ignored);
   * `max_completion_tokens` as OpenAI's reasoning models (max_tokens refused with a 400). Null: either.
   */
  limitField: 'max_tokens' | 'max_completion_tokens' | null;
}

export interface UpstreamRequest {
  path: string;
  body: Record<string, any>;
  authorization: string | undefined;
  /** The client went away before the answer was complete. */
  aborted: boolean;
  /** Chunks written before the end or the client leaving. */
  chunksSent: number;
}

export interface TestUpstream {
  /** Base URL ending in /v1. */
  url: string;
  requests: UpstreamRequest[];
  switches: UpstreamSwitches;
  reset(): void;
  close(): Promise<void>;
}

const DEFAULTS: UpstreamSwitches = { noUsage: false, failWith: null, delayMs: 0, holdUntil: null, chunkDelayMs: 0, holdAfter: null, reply: 'Hello there! The quick brown fox jumps over the lazy dog.', raw: null, limitField: null };
export const words = (s: string) => s.split(/\s+/).filter(Boolean);

function promptTokens(messages: Array<{ content?: unknown }>): number {
  let n = 0;
  for (const m of messages ?? []) {
    n += 1;
    const c = m.content;
    const text = typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: string }) => p.text ?? '').join(' ') : '';
    n += words(text).length;
  }
  return n;
}


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startUpstream(): Promise<TestUpstream> {
  const requests: UpstreamRequest[] = [];
  const switches: UpstreamSwitches = { ...DEFAULTS };
  let n = 0;
  const server: Server = createServer(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || '{}') as Record<string, any>;
    const rec: UpstreamRequest = { path: req.url ?? '', body, authorization: req.headers.authorization, aborted: false, chunksSent: 0 };
    requests.push(rec);
    res.on('close', () => {
      if (!res.writableEnded) rec.aborted = true;
    });
    const json = (status: number, b: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b));
    };
    if (switches.delayMs) await sleep(switches.delayMs);
    if (switches.holdUntil) await switches.holdUntil;
    if (res.destroyed) return;
    if (switches.raw) {
      res.writeHead(switches.raw.status ?? 200, { 'content-type': switches.raw.type, ...switches.raw.headers });
      return res.end(switches.raw.text);
    }
    if (switches.failWith !== null) {
      return json(switches.failWith, { error: { message: switches.failWith >= 500 ? 'upstream exploded' : 'messages: something is wrong with this request', type: switches.failWith >= 500 ? 'server_error' : 'invalid_request_error', code: null } });
    }
    if (req.url === '/v1/embeddings') {
      const inputs: unknown[] = Array.isArray(body.input) ? body.input : [body.input];
      const vector = (x: unknown) => Array.from({ length: 8 }, (_, i) => (String(x).length + i) / 64);
      // The openai SDK asks for base64 (little-endian float32) unless told otherwise.
      const encode = (v: number[]) => (body.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v);
      const data = inputs.map((x, index) => ({ object: 'embedding', index, embedding: encode(vector(x)) }));
      const tokens = inputs.reduce<number>((s, x) => s + words(String(x)).length, 0);
      return json(200, { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
    }
    if (req.url !== '/v1/chat/completions') return json(404, { error: { message: `no route ${req.url}` } });
    const id = `chatcmpl-up${++n}`;
    const created = Math.floor(Date.now() / 1000);
    const all = words(switches.reply);
    if (switches.limitField === 'max_completion_tokens' && body.max_tokens != null) {
      return json(400, { error: { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: 'invalid_request_error', param: 'max_tokens', code: 'unsupported_parameter' } });
    }
    const limit = switches.limitField ? body[switches.limitField] : (body.max_tokens ?? body.max_completion_tokens);
    const out = typeof limit === 'number' ? all.slice(0, limit) : all;
    const finish = out.length < all.length ? 'length' : 'stop';
    const pieces = out.map((w, i) => (i === 0 ? w : ` ${w}`));
    const usage = { prompt_tokens: promptTokens(body.messages), completion_tokens: pieces.length, total_tokens: promptTokens(body.messages) + pieces.length };
    if (!body.stream) {
      return json(200, { id, object: 'chat.completion', created, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: finish }], usage, system_fingerprint: 'fp_test' });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (o: unknown) => {
      if (res.destroyed) return false;
      res.write(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`);
      rec.chunksSent++;
      return true;
    };
    const chunk = (delta: object, finish_reason: string | null = null) => ({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta, finish_reason }] });
    send(chunk({ role: 'assistant', content: '' }));
    for (const [i, p] of pieces.entries()) {
      if (switches.holdAfter?.pieces === i) await switches.holdAfter.until;
      if (switches.chunkDelayMs) await sleep(switches.chunkDelayMs);
      if (!send(chunk({ content: p }))) return;
    }
    send(chunk({}, finish));
    if (body.stream_options?.include_usage && !switches.noUsage) send({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [], usage });
    send('[DONE]');
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    switches,
    reset() {
      Object.assign(switches, DEFAULTS);
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
