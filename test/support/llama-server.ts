import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { getLlama, LlamaLogLevel, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from 'node-llama-cpp';
import { tinyLlamaPath } from './gguf.ts';
import { readBody } from './http.ts';

/**
 * A minimal OpenAI-compatible server on loopback backed by a real engine: llama.cpp through node-llama-cpp,
 * running a GGUF file (by default the tiny random model of gguf.ts). It stands in for Ollama or
 * llama-server on an inference node:
 * - GET /v1/models;
 * - POST /v1/chat/completions, streamed (SSE) and not, honouring max_tokens (or max_completion_tokens),
 *   temperature, top_p, seed and stream_options.include_usage. usage is the engine's own count:
 *   prompt_tokens = tokens of the rendered prompt (BOS included), completion_tokens = tokens generated.
 *
 * The prompt is the messages as `role: content` lines followed by `assistant:`. Requests run one at a
 * time on one context sequence, and every request is recorded with the engine's counts in `completions`.
 * Streamed text is the detokenized output, emitted only as far as it is valid UTF-8 (a token may end in
 * the middle of a multi-byte character).
 */
export interface EngineCompletion {
  /** The model name the request asked for. */
  model: string;
  stream: boolean;
  promptTokens: number;
  completionTokens: number;
  /** The generated text exactly as answered (streamed pieces joined, or the message content). */
  text: string;
  finishReason: 'stop' | 'length';
  /** The client went away before the answer was complete. */
  aborted: boolean;
}

export interface LlamaServer {
  /** Base URL ending in /v1. */
  url: string;
  /** The name this server serves its model under (like an Ollama tag). */
  readonly modelName: string;
  /** Serves the model under another name from now on (as an Ollama whose model was swapped): listed and answered only by it. */
  serveAs(name: string): void;
  completions: EngineCompletion[];
  engine: Engine;
  close(): Promise<void>;
}

export interface Engine {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  sequence: LlamaContextSequence;
  contextSize: number;
  dispose(): Promise<void>;
}

/**
 * llama.cpp from the prebuilt binary package in node_modules (@node-llama-cpp/linux-x64): CPU only, never
 * building or downloading anything. Logs at error level only. One thread by default: ggml's threads spin
 * at barriers, and on a busy 2-core machine two of them are many times slower than one.
 */
export function offlineLlama(threads = 1): Promise<Llama> {
  return getLlama({ gpu: false, build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, maxThreads: threads, logLevel: LlamaLogLevel.error });
}

export async function loadEngine(opts: { modelPath?: string; threads?: number; contextSize?: number } = {}): Promise<Engine> {
  const threads = opts.threads ?? 1;
  const llama = await offlineLlama(threads);
  try {
    const model = await llama.loadModel({ modelPath: opts.modelPath ?? tinyLlamaPath(), gpuLayers: 0 });
    const contextSize = opts.contextSize ?? Math.min(256, model.trainContextSize);
    const context = await model.createContext({ contextSize, batchSize: contextSize, sequences: 1, threads });
    return { llama, model, context, sequence: context.getSequence(), contextSize, dispose: () => llama.dispose() };
  } catch (e) {
    await llama.dispose();
    throw e;
  }
}

type Message = { role?: string; content?: unknown };
const contentText = (c: unknown): string => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: unknown }) => (typeof p?.text === 'string' ? p.text : '')).join('') : '');
export const renderPrompt = (messages: Message[]) => messages.map((m) => `${m.role ?? 'user'}: ${contentText(m.content)}\n`).join('') + 'assistant:';

/** Turns the tokens generated so far into text pieces, holding back a character still incomplete. */
export class Detokenizer {
  private tokens: Token[] = [];
  private emitted = '';
  constructor(private model: LlamaModel) {}
  /** The new text that `token` completes (possibly ''). */
  push(token: Token): string {
    this.tokens.push(token);
    return this.take(this.model.detokenize(this.tokens).replace(/\uFFFD+$/, ''));
  }
  /** Whatever is left at the end, invalid bytes included (as U+FFFD). */
  end(): string {
    return this.take(this.model.detokenize(this.tokens));
  }
  get text() {
    return this.emitted;
  }
  private take(full: string): string {
    if (full.length <= this.emitted.length || !full.startsWith(this.emitted)) return '';
    const piece = full.slice(this.emitted.length);
    this.emitted = full;
    return piece;
  }
}

interface Generation {
  promptTokens: number;
  completionTokens: number;
  text: string;
  finishReason: 'stop' | 'length';
}

class BadRequest extends Error {}

async function generate(
  e: Engine,
  body: Record<string, any>,
  onPiece: (text: string) => void,
  aborted: () => boolean,
): Promise<Generation> {
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new BadRequest('messages must be a non-empty array');
  const { model, sequence } = e;
  const prompt: Token[] = [...(model.tokens.shouldPrependBosToken && model.tokens.bos !== null ? [model.tokens.bos] : []), ...model.tokenize(renderPrompt(body.messages))];
  const room = e.contextSize - prompt.length;
  if (room < 1) throw new BadRequest(`the prompt is ${prompt.length} tokens; the context holds ${e.contextSize}`);
  const asked = body.max_tokens ?? body.max_completion_tokens;
  if (asked !== undefined && asked !== null && (!Number.isInteger(asked) || asked < 1)) throw new BadRequest('max_tokens must be a positive integer');
  const limit = Math.min(asked ?? room, room);
  await sequence.clearHistory();
  const text = new Detokenizer(model);
  let generated = 0;
  const options = { temperature: body.temperature ?? 1, topP: body.top_p ?? 1, seed: body.seed ?? 0 };
  for await (const token of sequence.evaluate(prompt, options)) {
    generated++;
    const piece = text.push(token);
    if (piece) onPiece(piece);
    if (generated >= limit || aborted()) break;
  }
  const rest = text.end();
  if (rest) onPiece(rest);
  return { promptTokens: prompt.length, completionTokens: generated, text: text.text, finishReason: generated >= limit ? 'length' : 'stop' };
}


const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};
const error = (res: ServerResponse, status: number, message: string, type = 'invalid_request_error') => json(res, status, { error: { message, type, code: null } });

export async function startLlamaServer(opts: { modelPath?: string; modelName?: string; threads?: number; contextSize?: number; port?: number } = {}): Promise<LlamaServer> {
  const engine = await loadEngine(opts);
  let modelName = opts.modelName ?? 'tiny-llama:test';
  const completions: EngineCompletion[] = [];
  let queue: Promise<unknown> = Promise.resolve();
  let n = 0;
  const created = Math.floor(Date.now() / 1000);

  const chat = async (body: Record<string, any>, res: ServerResponse, gone: () => boolean) => {
    if (gone()) return;
    if (body.model !== modelName) return error(res, 404, `model '${String(body.model)}' not found`, 'not_found_error');
    const id = `chatcmpl-llama${++n}`;
    const stream = body.stream === true;
    const chunk = (delta: object, finish_reason: string | null = null) => ({ id, object: 'chat.completion.chunk', created, model: modelName, choices: [{ index: 0, delta, finish_reason }] });
    const send = (o: unknown) => {
      if (!res.destroyed) res.write(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`);
    };
    let started = false;
    const start = () => {
      if (started) return;
      started = true;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      send(chunk({ role: 'assistant', content: '' }));
    };
    let g: Generation;
    try {
      // Headers go out once the prompt is accepted, i.e. with the first piece (or at the end).
      const onPiece = (piece: string) => {
        if (!stream) return;
        start();
        send(chunk({ content: piece }));
      };
      g = await generate(engine, body, onPiece, gone);
    } catch (e) {
      if (e instanceof BadRequest && !started) return error(res, 400, e.message);
      throw e;
    }
    completions.push({ model: body.model, stream, ...g, aborted: gone() });
    const usage = { prompt_tokens: g.promptTokens, completion_tokens: g.completionTokens, total_tokens: g.promptTokens + g.completionTokens };
    if (!stream) {
      return json(res, 200, { id, object: 'chat.completion', created, model: modelName, choices: [{ index: 0, message: { role: 'assistant', content: g.text }, finish_reason: g.finishReason }], usage });
    }
    start();
    send(chunk({}, g.finishReason));
    if (body.stream_options?.include_usage) send({ id, object: 'chat.completion.chunk', created, model: modelName, choices: [], usage });
    send('[DONE]');
    res.end();
  };

  const server = createServer(async (req, res) => {
    try {
      if (req.method === 'GET' && req.url === '/v1/models') {
        return json(res, 200, { object: 'list', data: [{ id: modelName, object: 'model', created, owned_by: 'llama.cpp' }] });
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return error(res, 404, `no route ${req.method} ${req.url}`, 'not_found_error');
      let body: Record<string, any>;
      try {
        body = JSON.parse(await readBody(req)) as Record<string, any>;
      } catch {
        return error(res, 400, 'the body is not JSON');
      }
      let gone = false;
      res.on('close', () => {
        if (!res.writableEnded) gone = true;
      });
      // One generation at a time on the one sequence.
      const run = queue.then(() => chat(body, res, () => gone));
      queue = run.catch(() => undefined);
      await run;
    } catch (e) {
      if (!res.headersSent) error(res, 500, (e as Error).message, 'server_error');
      else res.destroy();
    }
  });
  await new Promise<void>((r) => server.listen(opts.port ?? 0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    get modelName() {
      return modelName;
    },
    serveAs(name: string) {
      modelName = name;
    },
    completions,
    engine,
    async close() {
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
      await queue;
      await engine.dispose();
    },
  };
}
