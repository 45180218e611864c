import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ServiceError, type ReceiptGuardrails } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { admits } from '../policies/content.ts';
import type { ActivePolicy } from '../policies/service.ts';
import { OUTPUT_FIELDS, rewriteInput, type Endpoint } from './input-text.ts';
import { FindingsLog, scanText, type DirectionPlan, type Finding, type Mode } from './scanner.ts';
import { StreamRedactor } from './stream-redactor.ts';

/**
 * What a key's policy does to one inference call. The inference routes' preHandler (`guardInference`) checks
 * the model and the output limit and scans the request before the handler runs: a blocked request is
 * refused before any upstream is called, a redacted one reaches the upstream redacted. The inference service
 * scans the answer (`output`, `outputStream`), refuses a blocked call with a receipt of its findings, and signs
 * `receiptField()` into the receipt. A key without a policy costs one property read and nothing else.
 */
export class RequestGuard {
  readonly log: FindingsLog;
  /** The finding that blocked the request or its answer (enforce mode). */
  blocked: Finding | null = null;

  constructor(
    readonly policy: ActivePolicy,
    readonly mode: Mode,
  ) {
    this.log = new FindingsLog(mode);
  }

  private get scanning(): boolean {
    return this.mode !== 'off';
  }

  /** Scans (and in enforce mode redacts) the request's texts in place; sets `blocked` when a rule blocks. */
  input(endpoint: Endpoint, body: unknown): void {
    const plan = this.policy.rules.input;
    if (!plan || !this.scanning) return;
    rewriteInput(endpoint, body, (text) => {
      const r = scanText(plan, text, 'input', this.log);
      return r.text;
    });
    this.blocked ??= this.log.blockedBy;
  }

  /** Scans a non-streamed chat completion's answer; redacts it in place. True when it changed. */
  output(body: Record<string, unknown>): boolean {
    const plan = this.policy.rules.output;
    if (!plan || !this.scanning) return false;
    let changed = false;
    for (const c of Array.isArray(body.choices) ? (body.choices as Array<Record<string, unknown>>) : []) {
      const m = c?.message as Record<string, unknown> | undefined;
      if (!m || typeof m !== 'object') continue;
      for (const k of OUTPUT_FIELDS) {
        if (typeof m[k] !== 'string' || !m[k]) continue;
        const r = scanText(plan, m[k] as string, 'output', this.log);
        if (r.text !== m[k]) {
          m[k] = r.text;
          changed = true;
        }
      }
    }
    this.blocked ??= this.log.blockedBy;
    return changed;
  }

  /** The scanner of a streamed answer, or null when the policy has no output rules (or scanning is off). */
  outputStream(): OutputStream | null {
    const plan = this.policy.rules.output;
    return plan && this.scanning ? new OutputStream(plan, this) : null;
  }

  /** What the receipt carries as `guardrails` (absent when nothing was scanned). */
  receiptField(): ReceiptGuardrails | undefined {
    if (this.mode === 'off' || (!this.policy.rules.input && !this.policy.rules.output)) return undefined;
    return { findings: this.log.list().map((f) => ({ action: f.action, category: f.category, count: f.count, decision: f.decision, direction: f.direction, rule: f.rule, severity: f.severity })), mode: this.mode };
  }

  /** The refusal of a blocked call: 400 guardrail_blocked naming the rule, and the receipt that records it (when one was signed). */
  blockedError(receiptId: string | null): ServiceError {
    const b = this.blocked!;
    return new ServiceError('guardrail_blocked', `Blocked by guardrail rule ${b.rule} (${b.category}) on the ${b.direction}`, { rule: b.rule, direction: b.direction, category: b.category, ...(receiptId ? { receipt_id: receiptId } : {}) });
  }
}

type Delta = Record<string, unknown>;

/**
 * Scans a streamed answer chunk by chunk: each text field of each choice through its own StreamRedactor in
 * enforce mode (so a match split across chunks is still redacted, holding back only what a match needs);
 * otherwise (monitor mode, or only `allow` rules) the text passes at once and is scanned whole at the end.
 */
export class OutputStream {
  private readonly redactors = new Map<string, StreamRedactor>();
  private readonly texts = new Map<string, string>();
  private readonly rewriting: boolean;

  constructor(
    private readonly plan: DirectionPlan,
    private readonly guard: RequestGuard,
  ) {
    this.rewriting = guard.mode === 'enforce' && plan.rewrites;
  }

  get blocked(): boolean {
    return this.guard.blocked !== null;
  }

  /**
   * Rewrites the texts of a chunk's choices in place (a choice's finish flushes what its redactors hold).
   * True when the chunk carried text and now carries none and nothing else: it need not be sent.
   */
  chunk(choices: ReadonlyArray<{ index?: unknown; delta?: Delta; finish_reason?: string | null }>): boolean {
    let had = false;
    let left = false;
    for (const c of choices) {
      const d = c.delta ?? (c.finish_reason ? (c.delta = {}) : undefined);
      if (!d) continue;
      const idx = typeof c.index === 'number' ? c.index : 0;
      for (const k of OUTPUT_FIELDS) {
        const piece = typeof d[k] === 'string' ? (d[k] as string) : '';
        if (piece) had = true;
        const key = `${idx}:${k}`;
        if (!this.rewriting) {
          if (piece) this.texts.set(key, (this.texts.get(key) ?? '') + piece);
          continue;
        }
        let r = this.redactors.get(key);
        if (!r && (piece || c.finish_reason)) {
          if (!piece) continue;
          r = new StreamRedactor(this.plan, this.guard.log, 'output');
          this.redactors.set(key, r);
        }
        if (!r) continue;
        let out = r.push(piece);
        if (c.finish_reason) {
          out += r.end();
          this.redactors.delete(key);
        }
        if (r.blocked) this.guard.blocked ??= this.guard.log.blockedBy;
        if (out) d[k] = out;
        else delete d[k];
        if (out) left = true;
      }
      if (c.finish_reason || (d.tool_calls !== undefined) || (d.role !== undefined)) left = true;
    }
    return had && !left && this.rewriting;
  }

  /** At the end of the stream: what redactors still hold, per choice and field (enforce), or the whole texts scanned (monitor). */
  finish(): Array<{ index: number; field: string; text: string }> {
    const out: Array<{ index: number; field: string; text: string }> = [];
    for (const [key, r] of this.redactors) {
      const text = r.end();
      if (r.blocked) this.guard.blocked ??= this.guard.log.blockedBy;
      const [i, field] = key.split(':') as [string, string];
      if (text) out.push({ index: Number(i), field, text });
    }
    this.redactors.clear();
    for (const text of this.texts.values()) scanText(this.plan, text, 'output', this.guard.log);
    this.texts.clear();
    if (this.guard.mode === 'enforce') this.guard.blocked ??= this.guard.log.blockedBy;
    return out;
  }
}

const ENDPOINTS: Record<string, Endpoint> = { '/v1/chat/completions': 'chat.completions', '/v1/messages': 'messages', '/v1/responses': 'responses', '/v1/embeddings': 'embeddings' };

/** The output bound a request asks for, in each shape's field, and that field's name. */
function askedOutput(endpoint: Endpoint, b: Record<string, unknown>): { field: string; value: number | undefined } {
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  if (endpoint === 'responses') return { field: 'max_output_tokens', value: num(b.max_output_tokens) };
  if (endpoint === 'messages') return { field: 'max_tokens', value: num(b.max_tokens) };
  const mct = num(b.max_completion_tokens);
  return mct !== undefined ? { field: 'max_completion_tokens', value: mct } : { field: 'max_tokens', value: num(b.max_tokens) };
}

/** The policy's models and output limit, checked on a request body (the limit set where the request names none). */
export function checkPolicy(policy: ActivePolicy, endpoint: Endpoint, body: Record<string, unknown>): void {
  if (policy.models && !admits(policy.models, String(body.model))) {
    throw new ServiceError('model_not_allowed', `model: this API key's policy ${policy.id} allows only ${policy.models.join(', ')}`, { param: 'model', policy_id: policy.id });
  }
  if (policy.maxOutputTokens !== null && endpoint !== 'embeddings') {
    const asked = askedOutput(endpoint, body);
    if (asked.value === undefined) body[asked.field] = policy.maxOutputTokens;
    else if (asked.value > policy.maxOutputTokens) {
      throw new ServiceError('invalid_request', `${asked.field}: this API key's policy ${policy.id} allows at most ${policy.maxOutputTokens} output tokens`, { param: asked.field, policy_id: policy.id });
    }
  }
}

/** Each inference request's guard, made by `guardInference` before the handler runs. */
const guards = new WeakMap<FastifyRequest, RequestGuard>();
export const guardOf = (req: FastifyRequest): RequestGuard | undefined => guards.get(req);

/**
 * The guard of one call of a key whose policy is live (undefined without one): the model and output limit
 * checked (a refusal is thrown), the request scanned and redacted in place. For HTTP requests the preHandler
 * below calls it; work run later under a key (batch lines) calls it itself.
 */
export function guardRequest(p: KeyPrincipal, endpoint: Endpoint, body: Record<string, unknown>, mode?: Mode): RequestGuard | undefined {
  const policy = p.policy as ActivePolicy | null | undefined;
  if (!policy) return undefined;
  checkPolicy(policy, endpoint, body);
  const guard = new RequestGuard(policy, mode ?? policy.mode);
  guard.input(endpoint, body);
  return guard;
}

/**
 * The preHandler of every inference route: a key whose policy is live has its model and output limit checked
 * and its request scanned here. A callback hook; a key without a policy costs one property read.
 */
export function guardInference(mode: Mode) {
  return (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    if (!(req.principal as KeyPrincipal).policy) return done();
    try {
      const guard = guardRequest(req.principal as KeyPrincipal, ENDPOINTS[req.routeOptions.url ?? '']!, req.body as Record<string, unknown>, mode);
      if (guard) guards.set(req, guard);
    } catch (e) {
      return done(e as Error);
    }
    done();
  };
}
