import { INFERENCE_JOBS, InferenceJobResult, ServiceError } from '@svc/shared';
import type { ModelPrice } from '../../config.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';
import type { AgentHub, JobResult, JobSpec } from '../../fleet/hub.ts';
import { AsyncQueue } from '../../fleet/queue.ts';
import type { ResolvedModel } from './catalog.ts';
import { withOutputLimit } from './output-limit.ts';
import { answerError, upstreamHttpError, type ProviderClient } from './upstream.ts';

export type Use = 'chat' | 'embeddings';
const PATHS: Record<Use, string> = { chat: '/chat/completions', embeddings: '/embeddings' };

export interface CallOptions {
  signal: CallerSignal;
  /** The paying account; none for the unmetered assistant. */
  accountId?: string;
  /** A node job leaves no row once it ended (the keyless assistant persists nothing). */
  unrecorded?: boolean;
}

interface Served {
  /** `provider:<name>` or `node:<id>` (`node` when the stream ended before its node was known). */
  backend: string;
  price: ModelPrice;
  /** Served by a node: the answer names the node's local model, which the caller must not see. */
  node: boolean;
}
export interface JsonAnswer extends Served {
  body: Record<string, unknown>;
  /** A provider's answer as it came: `body` is its parse, to be sent on as this text while unchanged. */
  text?: string;
}
export interface StreamAnswer extends Served {
  /** SSE `data:` payloads (chunk JSON text or `[DONE]`). */
  frames: AsyncIterable<string>;
  /** Settles when the upstream side ended; rejects if it failed after streaming began. */
  done: Promise<{ backend: string }>;
}

/** Characters of a node's stream the control plane keeps for a slow caller before the agent is asked to wait. */
const QUEUED_CHARS = 1024 * 1024;

/** A node-side failure before any output (local server unreachable or 5xx) may be retried on another node. */
const nodeFailed = (r: InferenceJobResult) => (r.status === 0 || r.status >= 500) && !r.final;
/** What a node's job result says about the node: its local server unreachable or failing is a failure of the node. */
const resultFailure = (result: unknown): string | null => {
  const r = InferenceJobResult.safeParse(result);
  if (!r.success) return 'the node answered an unreadable result';
  // A final failure is the caller's ask (an answer too large to send back), not the node's fault.
  return nodeFailed(r.data) ? `local inference server: ${r.data.status === 0 ? 'unreachable' : `HTTP ${r.data.status}`}` : null;
};

/**
 * The error of a node's answer that is not a 200. The node's local model names (its `model_map`, which the
 * caller must not see) become the public id in the upstream's message; a failure another node would repeat
 * says why in the agent's own words.
 */
function nodeError(r: InferenceJobResult, nodeId: string, m: ResolvedModel): ServiceError {
  const e = r.final && r.error ? new ServiceError('upstream_error', `Node ${nodeId}: ${r.error}`) : upstreamHttpError(r.status, r.body ?? r.error, `Node ${nodeId}`);
  return hideLocalNames(e, m);
}

/**
 * The error with every local name of the model's nodes replaced by its public id, in one pass (longest names
 * first), where a name stands whole: not inside a longer word, nor inside the id put in its place.
 */
export function hideLocalNames(e: ServiceError, m: ResolvedModel): ServiceError {
  const names = [...new Set(Object.values(m.nodes?.localModels ?? {}))].filter((n) => n && n !== m.id).sort((a, b) => b.length - a.length);
  if (!names.some((n) => e.message.includes(n))) return e;
  const whole = new RegExp(`(?<![A-Za-z0-9])(?:${names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?![A-Za-z0-9])`, 'g');
  return new ServiceError(e.type, e.message.replace(whole, m.id), e.extra);
}

/**
 * Routing: a model with an eligible inference node goes to the fleet (hub.dispatch picks the node; a
 * channel lost before output is retried elsewhere by the hub, a local-server failure before output is
 * retried here once on another node); a model also at a provider falls back to it when no node can take
 * the job. Otherwise the configured provider serves it.
 */
export class InferenceBackends {
  constructor(
    private readonly hub: AgentHub,
    private readonly providers: ProviderClient,
    /** Until a non-streamed answer; between two chunks of a stream (and until its first). */
    private readonly timeoutMs: number,
    /** A node stream's limit in all. */
    private readonly maxStreamMs: number = timeoutMs,
  ) {}

  private spec(use: Use, m: ResolvedModel, body: Record<string, unknown>, stream: boolean, o: CallOptions): JobSpec {
    // Node agents proxy Ollama, vLLM or llama.cpp's server, which all read the bound from max_tokens.
    const sent = use === 'chat' ? withOutputLimit(body, 'max_tokens') : body;
    const local = m.nodes!.localModels;
    return {
      kind: INFERENCE_JOBS[use],
      nodeKind: 'inference',
      model: m.id,
      // Each node learns its own local name only, not the other nodes' ids and names.
      payload: (nodeId: string) => ({ model: m.id, local_models: local[nodeId] !== undefined ? { [nodeId]: local[nodeId] } : {}, body: sent, stream }),
      failedResult: resultFailure,
      ...(stream ? { timeoutMs: this.maxStreamMs, idleTimeoutMs: this.timeoutMs } : { timeoutMs: this.timeoutMs }),
      accountId: o.accountId,
      retryable: true,
      signal: o.signal,
      ...(o.unrecorded ? { unrecorded: true } : {}),
    };
  }

  /** The model's nodes, or its provider when it has no node or none has room (not async: one promise, no extra turns). */
  private viaNodes<T>(m: ResolvedModel, node: () => Promise<T>, provider: () => Promise<T>): Promise<T> {
    if (!m.nodes) return provider();
    return node().catch((e: unknown) => {
      if (m.provider && e instanceof ServiceError && e.type === 'no_capacity') return provider();
      throw e;
    });
  }

  json(use: Use, m: ResolvedModel, body: Record<string, unknown>, o: CallOptions): Promise<JsonAnswer> {
    return this.viaNodes<JsonAnswer>(
      m,
      async () => {
        const spec = this.spec(use, m, body, false, o);
        let job = await this.hub.dispatch(spec);
        let r = InferenceJobResult.parse(job.result);
        if (nodeFailed(r)) {
          const again = await this.retry(spec, job);
          if (again) [job, r] = [again, InferenceJobResult.parse(again.result)];
        }
        if (r.status !== 200) throw nodeError(r, job.nodeId, m);
        const failed = answerError(use, r.body, `Node ${job.nodeId}`);
        if (failed) throw hideLocalNames(failed, m);
        return { body: r.body as Record<string, unknown>, backend: `node:${job.nodeId}`, price: m.nodes!.price, node: true };
      },
      async () => {
        const p = m.provider!;
        const sent = use === 'chat' ? withOutputLimit(body, p.config.outputLimitField) : body;
        const answer = await this.providers.json(p.config, PATHS[use], sent, o.signal);
        const failed = answerError(use, answer.body, `Provider ${p.config.name}`);
        if (failed) throw failed;
        return { body: answer.body as Record<string, unknown>, text: answer.text, backend: `provider:${p.config.name}`, price: p.price, node: false };
      },
    );
  }

  /** Once more on another node; null when there is none. */
  private async retry(spec: JobSpec, failed: JobResult): Promise<JobResult | null> {
    try {
      return await this.hub.dispatch(spec, [failed.nodeId]);
    } catch (e) {
      if (e instanceof ServiceError && e.type === 'no_capacity') return null;
      throw e;
    }
  }

  stream(m: ResolvedModel, body: Record<string, unknown>, o: CallOptions): Promise<StreamAnswer> {
    return this.viaNodes<StreamAnswer>(
      m,
      async () => {
        const spec = this.spec('chat', m, body, true, o);
        let a = await this.startNode(spec, m, []);
        if ('finished' in a && nodeFailed(a.finished.r)) {
          const failed = a.finished.job;
          const again = await this.startNode(spec, m, [failed.nodeId]).catch((e: unknown) => {
            if (e instanceof ServiceError && e.type === 'no_capacity') return null;
            throw e;
          });
          if (again) a = again;
        }
        if ('finished' in a) {
          const { job, r } = a.finished;
          if (r.status !== 200) throw nodeError(r, job.nodeId, m);
          return { frames: emptyFrames(), done: Promise.resolve({ backend: `node:${job.nodeId}` }), backend: `node:${job.nodeId}`, price: m.nodes!.price, node: true };
        }
        return { frames: a.frames, done: a.done, backend: 'node', price: m.nodes!.price, node: true };
      },
      async () => {
        const p = m.provider!;
        const frames = await this.providers.stream(p.config, PATHS.chat, withOutputLimit(body, p.config.outputLimitField), o.signal);
        const backend = `provider:${p.config.name}`;
        return { frames, done: Promise.resolve({ backend }), backend, price: p.price, node: false };
      },
    );
  }

  /** Dispatches a streamed job; resolves at its first output, or with its result when it ended without any. */
  private startNode(spec: JobSpec, m: ResolvedModel, exclude: string[]): Promise<{ frames: AsyncIterable<string>; done: Promise<{ backend: string }> } | { finished: { job: JobResult; r: InferenceJobResult } }> {
    const q = new AsyncQueue<string>((s) => s.length);
    let first: () => void = () => undefined;
    const started = new Promise<'started'>((resolve) => (first = () => resolve('started')));
    const end = this.hub
      .dispatch(
        {
          ...spec,
          onOutput: (out) => {
            if (out.stream !== 'data') return;
            q.push(out.data);
            first();
            // A caller reading slower than the node writes: the agent waits (and stops reading its local server).
            return q.below(QUEUED_CHARS) ?? undefined;
          },
        },
        exclude,
      )
      .then((job) => ({ job, r: InferenceJobResult.parse(job.result) }))
      .finally(() => q.close());
    const done = end.then(({ job, r }) => {
      if (r.status !== 200) throw nodeError(r, job.nodeId, m);
      return { backend: `node:${job.nodeId}` };
    });
    done.catch(() => undefined); // awaited by the consumer once streaming began; never unhandled
    return Promise.race([started, end]).then((x) => (x === 'started' ? { frames: q.iterate(), done } : { finished: x }));
  }
}

async function* emptyFrames(): AsyncGenerator<string> {
  /* a stream that produced nothing */
}
