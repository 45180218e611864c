import { ServiceError, deliveredText, estimateTokens, type ReceiptContext, type ReceiptEngine, type SignedReceipt, type TokenUsage } from '@svc/shared';
import type { InferenceConfig, ModelPrice } from '../../config.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';
import type { Hold, Metering, Usage } from '../money/metering.ts';
import { hideLocalNames, type InferenceBackends, type JsonAnswer, type StreamAnswer } from './backends.ts';
import { holdPrice, type ModelCatalog, type ResolvedModel } from './catalog.ts';
import { boundChatInput, boundEmbeddingInput, costMicroUsd, estimateChatInput, estimateEmbeddingInput } from './tokens.ts';
import { upstreamStreamError } from './upstream.ts';
import type { RequestGuard } from '../guardrails/enforce.ts'; // guardrails
import { isEngineModel, type EngineExpander } from './engine-model.ts'; // engine builds

export type Endpoint = 'chat.completions' | 'messages' | 'responses' | 'embeddings';

export interface CallContext {
  requestId: string;
  runId: string | null;
  /** e.g. `POST /v1/chat/completions`, for the usage event and receipt. */
  route: string;
  resource: string;
  endpoint: Endpoint;
  /** Aborts when the caller goes away. */
  signal: CallerSignal;
  /** Batches: the deployment discount (percent of the list price) on the hold and the charge. */
  discountPercent?: number;
  /** What the receipt cites (the source set named by the caller's X-Svc-Source-Set header), signed in as `context`. */
  receiptContext?: ReceiptContext;
  /** The key's policy at work on this call (guardrails/enforce.ts): its input already scanned; the answer is scanned here. */
  guard?: RequestGuard;
  /** The engine build serving a call of `engine/<slug>` (set by the service as it expands the build), signed into the receipt. */
  engine?: ReceiptEngine;
  /** Batches: runs with the answer before the charge settles (a throw releases the hold, nothing is charged). */
  beforeSettle?: (body: Record<string, unknown>) => Promise<void>;
  /**
   * HTTP callers: answer once the settle is signed and journaled, commit right after (Metering's
   * write-behind, for requests admitted from a credit lease). Batches leave it off: a line is recorded as
   * charged only once its settle committed.
   */
  settleBehind?: boolean;
}

export type Chunk = Record<string, unknown> & { choices?: Array<Record<string, unknown> & { delta?: Record<string, unknown>; finish_reason?: string | null }>; usage?: TokenUsage | null };

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface StreamEnd {
  usage: ChatUsage;
  finishReason: string | null;
  receipt: SignedReceipt;
  /** A usage chunk already went to the caller. */
  usageDelivered: boolean;
  /** id, created and model of the stream's chunks, for a chunk the sink adds. */
  meta: { id: string; created: number; model: string };
}

/** Where a stream goes: the OpenAI chat SSE, or a translator to the Messages or Responses event sequence. */
export interface ChatSink {
  readonly closed: boolean;
  /** The first chunk is about to be delivered: start the response (status 200 from here on). */
  begin(): void;
  chunk(c: Chunk): void;
  /** Resolves once what was sent reached the caller's socket (null when nothing waits): the stream then reads on. */
  drained(): Promise<void> | null;
  end(e: StreamEnd): void;
  /** The stream failed after it began; `partial` is set when what was delivered was charged. */
  fail(err: ServiceError, partial: StreamEnd | null): void;
}

interface Prepared {
  model: ResolvedModel;
  /** The local estimate, charged when the upstream reports no usage. */
  inputTokens: number;
  holdMicroUsd: number;
}

type Body = Record<string, unknown>;

/** A non-streamed answer with its receipt; `text`: see InferenceService.chat. */
export interface Answered {
  body: Body;
  text?: string;
  receipt: SignedReceipt;
}

/** The answer's body, and a provider's text of it while the body is as parsed from it (the upstream gave usage; not a node's, whose model is renamed). */
const unchanged = (a: JsonAnswer, usage: unknown): { body: Body; text?: string } => (usage && !a.node && a.text !== undefined ? { body: a.body, text: a.text } : { body: a.body });

const toUsage = (input: number, output: number): ChatUsage => ({ prompt_tokens: input, completion_tokens: output, total_tokens: input + output });
const int = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
const discounted = (micro: number, percent = 0): number => micro - Math.floor((micro * percent) / 100);

/**
 * The metered inference calls behind every inference route: resolve the model, hold the worst case (input
 * estimate at the input price plus the output bound at the output price), call the node or provider,
 * settle on the real usage (or the local estimate when the upstream reports none), never above the hold.
 * A stream whose caller leaves, or whose upstream breaks after delivering, is charged for what was
 * delivered; a failure before anything was delivered releases the hold and charges nothing.
 */
export class InferenceService {
  /** engine builds: expands `engine/<slug>` to its published build (set where the gateway is wired; null: no engine builds). */
  engines: EngineExpander | null = null;

  constructor(
    readonly catalog: ModelCatalog,
    private readonly backends: InferenceBackends,
    private readonly metering: Metering,
    private readonly cfg: InferenceConfig,
  ) {}

  private outputBound(price: ModelPrice, body: Body): number {
    const asked = int(body.max_completion_tokens) ?? int(body.max_tokens);
    const param = body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    if (asked !== undefined && price.maxOutputTokens !== null && asked > price.maxOutputTokens) {
      throw new ServiceError('invalid_request', `${param}: this model produces at most ${price.maxOutputTokens} tokens`, { param });
    }
    return asked ?? price.maxOutputTokens ?? this.cfg.defaultMaxOutputTokens;
  }

  private async prepareChat(body: Body): Promise<Prepared> {
    const model = await this.catalog.resolve(String(body.model), 'chat');
    const price = holdPrice(model);
    const n = int(body.n) ?? 1;
    // The hold assumes the most prompt tokens the text can make (its UTF-8 bytes plus template margins), so
    // the real count a tokenizer reports is charged in full; the ~4-characters estimate is only a fallback.
    return { model, inputTokens: estimateChatInput(body), holdMicroUsd: costMicroUsd(price, boundChatInput(body), this.outputBound(price, body) * Math.max(1, n)) };
  }

  private hold(p: KeyPrincipal, prep: Prepared, ctx: CallContext): Promise<Hold> {
    return this.metering.hold({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: prep.holdMicroUsd, route: ctx.route, resource: ctx.resource });
  }

  /** `detail` comes with its keys in code-unit order, as the receipt's others (canonicalize then takes its JSON.stringify path). */
  private usage(prep: Prepared, hold: Hold, price: ModelPrice, input: number, output: number, detail: Record<string, unknown>, ctx: Pick<CallContext, 'discountPercent' | 'receiptContext' | 'guard' | 'engine'>): Usage {
    const discountPercent = ctx.discountPercent ?? 0;
    const list = costMicroUsd(price, input, output);
    const cost = discounted(list, discountPercent);
    // `detail` is each call's own object: completed here rather than copied.
    if (discountPercent) {
      detail.discount_percent = discountPercent;
      detail.list_cost_micro_usd = list;
    }
    if (cost > hold.amount) detail.capped_at_hold = true;
    return { costMicroUsd: Math.min(cost, hold.amount), kind: 'inference', model: prep.model.id, units: { input_tokens: input, output_tokens: output }, detail, context: ctx.receiptContext, guardrails: ctx.guard?.receiptField(), engine: ctx.engine };
  }

  /**
   * engine builds: a body naming `engine/<slug>` (or `engine/<slug>@<version>`) becomes its build's request
   * (model, sealed system prompt, parameters) and the context carries the build's stamp and, when the build
   * names a guardrail policy, its guard (a request the key's own policy already blocked keeps that refusal).
   */
  private async expand(p: KeyPrincipal, body: Body, ctx: CallContext): Promise<{ body: Body; ctx: CallContext }> {
    if (!this.engines) throw new ServiceError('not_found', `The model "${String(body.model)}" does not exist: engine builds are not served here`, { param: 'model', code: 'model_not_found' });
    const x = await this.engines.expand(p, body);
    return { body: x.body, ctx: { ...ctx, engine: x.stamp, guard: ctx.guard?.blocked ? ctx.guard : (x.guard ?? ctx.guard) } };
  }

  /**
   * A request a guardrail blocked on its input: refused (400 guardrail_blocked) before any upstream is called,
   * with a receipt of what was found, at no charge. A batch line (`beforeSettle`) fails without one: a line
   * with a receipt counts as charged and is finished from its stored answer, which it has none of.
   */
  private async refuse(p: KeyPrincipal, model: string, ctx: CallContext, stream: boolean): Promise<never> {
    const guard = ctx.guard!;
    if (ctx.beforeSettle) throw guard.blockedError(null);
    await this.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: 0, route: ctx.route, resource: ctx.resource }, async () => ({
      result: null,
      usage: { costMicroUsd: 0, kind: 'inference', model, units: { input_tokens: 0, output_tokens: 0 }, detail: { endpoint: ctx.endpoint, outcome: 'guardrail_blocked', stream }, context: ctx.receiptContext, guardrails: guard.receiptField(), engine: ctx.engine },
    }));
    throw guard.blockedError(ctx.requestId);
  }

  /**
   * A non-streamed chat completion (OpenAI shape), with the signed receipt; `text` is a provider's answer as
   * it came, when nothing in it changed (the caller may send it rather than write `body` again).
   */
  async chat(p: KeyPrincipal, body: Body, ctx: CallContext): Promise<Answered> {
    if (isEngineModel(body.model)) ({ body, ctx } = await this.expand(p, body, ctx)); // engine builds
    const prep = await this.prepareChat(body);
    if (ctx.guard?.blocked) await this.refuse(p, prep.model.id, ctx, false); // guardrails
    const out = await this.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: discounted(prep.holdMicroUsd, ctx.discountPercent), route: ctx.route, resource: ctx.resource }, async (hold) => {
      const a = await this.backends.json('chat', prep.model, body, { signal: ctx.signal, accountId: p.accountId });
      if (a.node) a.body.model = prep.model.id;
      const u = (a.body.usage ?? null) as TokenUsage | null;
      const choices = Array.isArray(a.body.choices) ? (a.body.choices as Array<{ message?: unknown }>) : [];
      const input = int(u?.prompt_tokens) ?? prep.inputTokens;
      const output = int(u?.completion_tokens) ?? estimateTokens(choices.map((c) => deliveredText(c.message)).join(''));
      const source = int(u?.prompt_tokens) !== undefined && int(u?.completion_tokens) !== undefined ? 'upstream' : 'estimated';
      if (!u) a.body.usage = toUsage(input, output);
      const redacted = ctx.guard?.output(a.body) ?? false; // guardrails: the answer scanned, redacted in place
      const outcome = ctx.guard?.blocked ? 'guardrail_blocked' : 'completed';
      await ctx.beforeSettle?.(a.body);
      return { result: redacted ? { body: a.body } : unchanged(a, u), usage: this.usage(prep, hold, a.price, input, output, { backend: a.backend, endpoint: ctx.endpoint, outcome, stream: false, usage_source: source }, ctx) };
    }, { behind: ctx.settleBehind });
    if (ctx.guard?.blocked) throw ctx.guard.blockedError(ctx.requestId); // guardrails: the answer was generated (and charged), not delivered
    return { ...out.result, receipt: out.receipt };
  }

  /**
   * A streamed chat completion into a sink. Errors before the first chunk throw (the route answers with
   * the error status); later ones go to `sink.fail`. The upstream is always asked for usage
   * (`stream_options.include_usage`); the usage chunk reaches the caller only with `forwardUsage`.
   */
  async chatStream(p: KeyPrincipal, body: Body, ctx: CallContext, sink: ChatSink, opts: { forwardUsage: boolean }): Promise<void> {
    if (isEngineModel(body.model)) ({ body, ctx } = await this.expand(p, body, ctx)); // engine builds
    const prep = await this.prepareChat(body);
    if (ctx.guard?.blocked) await this.refuse(p, prep.model.id, ctx, true); // guardrails
    const hold = await this.hold(p, prep, ctx);
    const ac = new AbortController();
    const onAbort = () => ac.abort(new Error('caller went away'));
    if (ctx.signal.aborted) onAbort();
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const so = body.stream_options && typeof body.stream_options === 'object' ? (body.stream_options as Body) : {};
    const upstreamBody = { ...body, stream: true, stream_options: { ...so, include_usage: true } };
    let up: StreamAnswer;
    try {
      up = await this.backends.stream(prep.model, upstreamBody, { signal: ac.signal, accountId: p.accountId });
    } catch (e) {
      ctx.signal.removeEventListener('abort', onAbort);
      await this.metering.release(hold).catch(() => undefined);
      throw e;
    }
    const who = up.node ? 'The node' : 'The provider';
    let began = false;
    let text = '';
    let usage: TokenUsage | null = null;
    let usageDelivered = false;
    let finishReason: string | null = null;
    let sawDone = false;
    let failure: ServiceError | null = null;
    let ended = false;
    let backend = up.backend;
    const meta = { id: `chatcmpl-${ctx.requestId}`, created: Math.floor(Date.now() / 1000), model: prep.model.id };
    const gone = () => sink.closed || ctx.signal.aborted;
    const held: Chunk[] = [];
    // guardrails: the answer's texts through the policy's output rules; `raw` is what the upstream generated.
    const guardOut = ctx.guard?.outputStream() ?? null;
    let raw = '';
    const start = () => {
      if (began) return;
      began = true;
      sink.begin();
      for (const c of held.splice(0)) sink.chunk(c);
    };
    try {
      for await (const data of up.frames) {
        if (gone()) break;
        if (data === '[DONE]') {
          sawDone = true;
          continue;
        }
        let chunk: Chunk;
        try {
          chunk = JSON.parse(data) as Chunk;
        } catch {
          continue;
        }
        if (chunk.error) {
          failure = hideLocalNames(upstreamStreamError(chunk.error, who), prep.model);
          break;
        }
        if (up.node && typeof chunk.model === 'string') chunk.model = prep.model.id;
        if (typeof chunk.id === 'string') meta.id = chunk.id;
        if (typeof chunk.created === 'number') meta.created = chunk.created;
        if (typeof chunk.model === 'string') meta.model = chunk.model;
        const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
        if (chunk.usage) usage = chunk.usage;
        if (!opts.forwardUsage && 'usage' in chunk) {
          // The usage chunk forced upstream goes no further; other chunks without choices (Azure's
          // prompt_filter_results) do, without the usage field the caller did not ask for.
          if (choices.length === 0 && chunk.usage) continue;
          delete chunk.usage;
        }
        if (chunk.usage) usageDelivered = true;
        if (guardOut) {
          for (const c of choices) raw += deliveredText(c.delta);
          const idle = guardOut.chunk(choices);
          if (guardOut.blocked) {
            // What came before the blocking match goes out; nothing from it on.
            const before = choices.reduce((t, c) => t + deliveredText(c.delta), '');
            if (before) {
              start();
              text += before;
              sink.chunk({ ...chunk, choices: choices.map((c) => ({ ...c, finish_reason: null })) });
            }
            failure = ctx.guard!.blockedError(ctx.requestId);
            break;
          }
          if (idle) continue; // all its text held back for now
        }
        let piece = '';
        for (const c of choices) {
          piece += deliveredText(c.delta);
          if (c.finish_reason) finishReason = c.finish_reason;
        }
        // Leading chunks without content (the role chunk) wait, so a failure before the first content
        // still answers with its own status rather than a 200 stream.
        if (!began && !piece && !finishReason && !chunk.usage) {
          held.push(chunk);
          continue;
        }
        start();
        text += piece;
        sink.chunk(chunk);
        // A caller reading slower than the upstream writes holds the upstream back (its socket, for a provider)
        // rather than have the answer pile up here.
        const drained = sink.drained();
        if (drained) await drained;
      }
      if (!failure && !gone() && guardOut) {
        // guardrails: what the redactors still hold (choices that sent no finish_reason), then the verdict.
        for (const rest of guardOut.finish()) {
          start();
          text += rest.text;
          sink.chunk({ id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices: [{ index: rest.index, delta: { [rest.field]: rest.text }, finish_reason: null }] });
        }
        if (guardOut.blocked) failure = ctx.guard!.blockedError(ctx.requestId);
      }
      if (!failure && !gone()) {
        backend = (await up.done).backend;
        // Finished: a finish_reason, or [DONE] after content (a server that sends no finish_reason). A stream
        // that stopped without either was cut short, however cleanly its connection closed.
        if (finishReason !== null || (sawDone && text.length > 0)) ended = true;
        else failure = new ServiceError('upstream_error', `${who} ended the stream before finishing the answer`);
      }
    } catch (e) {
      if (!gone()) failure = e instanceof ServiceError ? e : new ServiceError('upstream_error', `${who} broke off the stream`);
    } finally {
      ctx.signal.removeEventListener('abort', onAbort);
      if (!ended) ac.abort(new Error('stream ended early'));
    }
    const delivered = began && text.length > 0;
    // guardrails: an answer a rule blocked was generated all the same: charged, with the receipt of the findings.
    const guardBlocked = failure?.type === 'guardrail_blocked';
    if (!ended && !delivered && !guardBlocked) {
      // Nothing reached the caller: no charge.
      await this.metering.release(hold).catch(() => undefined);
      if (failure && !began) throw failure;
      if (failure) sink.fail(failure, null);
      return;
    }
    // Upstream usage counts for a stream that ran to its end; otherwise what was delivered is estimated.
    const input = int(usage?.prompt_tokens) ?? prep.inputTokens;
    const complete = ended && int(usage?.completion_tokens) !== undefined;
    const output = complete ? int(usage!.completion_tokens)! : estimateTokens(guardBlocked ? raw : text);
    const outcome = ended ? 'completed' : guardBlocked ? 'guardrail_blocked' : failure ? 'upstream_error' : 'client_disconnected';
    let receipt: SignedReceipt;
    try {
      const settled = await this.metering.settle(
        hold,
        this.usage(prep, hold, up.price, input, output, { backend, endpoint: ctx.endpoint, outcome, stream: true, usage_source: complete && int(usage?.prompt_tokens) !== undefined ? 'upstream' : 'estimated' }, { receiptContext: ctx.receiptContext, guard: ctx.guard, engine: ctx.engine }),
        { behind: ctx.settleBehind },
      );
      receipt = settled.receipt;
    } catch (e) {
      if (!began) throw e;
      sink.fail(new ServiceError('internal_error', 'Settling this stream failed; it was not charged'), null);
      return;
    }
    const end: StreamEnd = { usage: toUsage(input, output), finishReason, receipt, usageDelivered, meta };
    if (failure && !began) throw failure; // guardrails: blocked before anything went out, answered 400
    if (failure) return sink.fail(failure, end);
    if (gone()) return;
    start();
    sink.end(end);
  }

  /** Embeddings (OpenAI shape), with the signed receipt (and `text` as for `chat`). */
  async embeddings(p: KeyPrincipal, body: Body, ctx: CallContext): Promise<Answered> {
    if (isEngineModel(body.model)) throw new ServiceError('invalid_request', `model: an engine build (${String(body.model)}) serves chat completions, Messages and Responses, not embeddings`, { param: 'model' }); // engine builds
    const model = await this.catalog.resolve(String(body.model), 'embeddings');
    if (ctx.guard?.blocked) await this.refuse(p, model.id, ctx, false); // guardrails
    const inputTokens = estimateEmbeddingInput(body.input);
    const prep: Prepared = { model, inputTokens, holdMicroUsd: costMicroUsd(holdPrice(model), boundEmbeddingInput(body.input), 0) };
    const out = await this.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: discounted(prep.holdMicroUsd, ctx.discountPercent), route: ctx.route, resource: ctx.resource }, async (hold) => {
      const a = await this.backends.json('embeddings', model, body, { signal: ctx.signal, accountId: p.accountId });
      if (a.node) a.body.model = model.id;
      const u = (a.body.usage ?? null) as TokenUsage | null;
      const input = int(u?.prompt_tokens) ?? inputTokens;
      if (!u) a.body.usage = { prompt_tokens: input, total_tokens: input };
      await ctx.beforeSettle?.(a.body);
      return { result: unchanged(a, u), usage: this.usage(prep, hold, a.price, input, 0, { backend: a.backend, endpoint: ctx.endpoint, outcome: 'completed', stream: false, usage_source: int(u?.prompt_tokens) !== undefined ? 'upstream' : 'estimated' }, ctx) };
    }, { behind: ctx.settleBehind });
    return { ...out.result, receipt: out.receipt };
  }

  /** A non-streamed chat completion with no hold, usage event or receipt: the gateway's own keyless assistant (media module). */
  async completeUnmetered(body: Body, signal: CallerSignal): Promise<Body> {
    const model = await this.catalog.resolve(String(body.model), 'chat');
    const a = await this.backends.json('chat', model, body, { signal, unrecorded: true });
    if (a.node) a.body.model = model.id;
    return a.body;
  }
}
