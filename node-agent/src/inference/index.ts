import { INFERENCE_JOBS, InferenceJobPayload, MAX_CHANNEL_MESSAGE_BYTES, MAX_OUTPUT_CHARS, SseParser, deliveredText, frameData, estimateTokens, type InferenceJobResult, type TokenUsage } from '@svc/shared';
import type { JobContext, JobHandler, JobOutcome } from '../jobs/types.ts';

/**
 * Inference jobs: the agent proxies `inference.chat` and `inference.embeddings` to a local
 * OpenAI-compatible server (Ollama, vLLM, llama.cpp: `SVC_INFERENCE_URL`, e.g. http://127.0.0.1:11434/v1).
 * Streams are relayed one SSE `data:` payload per output; the job's work units are the output tokens
 * (the server's usage, else the local estimate), which feed the control plane's speed clamp.
 *
 * The public model id is translated to the local name by, in order: `SVC_INFERENCE_MODEL_MAP` (JSON, an
 * operator override), this node's entry in the job's `local_models` (its enrolled `model_map`), the id itself.
 */
export interface InferenceOptions {
  /** Base URL of the local server, ending in /v1. */
  url: string;
  apiKey?: string | undefined;
  modelMap?: Record<string, string>;
  /** This node's id once the control plane has told it (heartbeat answer). */
  nodeId?: () => string | null | undefined;
}

export function inferenceOptionsFromEnv(env: NodeJS.ProcessEnv): InferenceOptions | null {
  const url = env.SVC_INFERENCE_URL?.trim();
  if (!url) return null;
  let modelMap: Record<string, string> = {};
  if (env.SVC_INFERENCE_MODEL_MAP?.trim()) {
    const parsed = JSON.parse(env.SVC_INFERENCE_MODEL_MAP) as unknown;
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string')) {
      throw new Error('SVC_INFERENCE_MODEL_MAP must be a JSON object of public model id -> local model name');
    }
    modelMap = parsed as Record<string, string>;
  }
  return { url: new URL(url).toString().replace(/\/+$/, ''), apiKey: env.SVC_INFERENCE_API_KEY || undefined, modelMap };
}

/** Handlers for the inference job kinds, or none when no local server is configured. */
export function inferenceHandlers(opts: InferenceOptions | null): Record<string, JobHandler> {
  if (!opts) return {};
  return {
    [INFERENCE_JOBS.chat]: (payload, ctx) => proxy(opts, '/chat/completions', payload, ctx),
    [INFERENCE_JOBS.embeddings]: (payload, ctx) => proxy(opts, '/embeddings', payload, ctx),
  };
}

/** A non-streamed answer's limit: the channel's message limit less room for the finish around it (JSON escaping included). */
const MAX_ANSWER_BYTES = MAX_CHANNEL_MESSAGE_BYTES / 2;

const done = (result: InferenceJobResult, workUnits?: number): JobOutcome => (workUnits === undefined ? { result } : { result, workUnits });

async function proxy(opts: InferenceOptions, path: string, raw: unknown, ctx: JobContext): Promise<JobOutcome> {
  const p = InferenceJobPayload.parse(raw);
  const nodeId = opts.nodeId?.() ?? '';
  const local = opts.modelMap?.[p.model] ?? p.local_models[nodeId] ?? p.model;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: p.stream ? 'text/event-stream' : 'application/json' };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  let res: Response;
  try {
    res = await fetch(opts.url + path, { method: 'POST', headers, body: JSON.stringify({ ...p.body, model: local }), signal: ctx.signal });
  } catch (e) {
    if (ctx.signal.aborted) throw e;
    // Unreachable local server: a result, not a job failure, so the control plane can try another node.
    return done({ status: 0, error: `local inference server unreachable: ${(e as Error).message}`.slice(0, 2000) });
  }
  if (!res.ok) {
    const text = await res.text();
    let body: unknown = text.slice(0, 4000);
    // An error body is parsed when it is small (the control plane reads its message); a large one is cut.
    if (text.length <= 64 * 1024) {
      try {
        body = JSON.parse(text);
      } catch {
        /* keep the text */
      }
    }
    return done({ status: res.status, body });
  }
  if (!p.stream) {
    const text = await res.text();
    // The answer goes back in one channel message: one the channel cannot carry would close it (and every
    // other job on it) again and again; another node would answer as large, so it is not tried elsewhere.
    if (Buffer.byteLength(text) > MAX_ANSWER_BYTES) return done({ status: 502, final: true, error: `the answer (${Buffer.byteLength(text)} bytes) is larger than a node can send back (${MAX_ANSWER_BYTES} bytes); ask for less at once` });
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON: refused below */
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return done({ status: 502, error: 'the local inference server answered something other than a JSON object' });
    const body = parsed as { usage?: TokenUsage; choices?: Array<{ message?: unknown }> };
    const out = body.usage?.completion_tokens ?? estimateTokens((body.choices ?? []).map((c) => deliveredText(c.message)).join(''));
    return done({ status: res.status, body, usage: body.usage ?? null }, out);
  }
  const parser = new SseParser();
  const decoder = new TextDecoder();
  let usage: TokenUsage | null = null;
  let text = '';
  const take = (data: string): void | Promise<void> => {
    // A frame the channel cannot carry ends the job as a failure: dropped, it would leave a hole in a stream
    // that then completes as if whole.
    if (data.length > MAX_OUTPUT_CHARS) throw new Error(`the local server sent a stream frame of ${data.length} characters, more than a node can pass on (${MAX_OUTPUT_CHARS})`);
    const wait = ctx.emit('data', data);
    if (data === '[DONE]') return wait;
    try {
      const chunk = JSON.parse(data) as { usage?: TokenUsage | null; choices?: Array<{ delta?: unknown }> };
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices ?? []) text += deliveredText(c.delta);
    } catch {
      /* relayed as is; the control plane decides */
    }
    return wait;
  };
  // Awaiting emit's promise stops reading the local server while outputs wait to go (a slow caller).
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    for (const f of parser.push(decoder.decode(bytes, { stream: true }))) if (f.data) await take(frameData(f));
  }
  for (const f of parser.end()) if (f.data) await take(frameData(f));
  const u = usage as TokenUsage | null;
  return done({ status: res.status, usage: u }, u?.completion_tokens ?? estimateTokens(text));
}
