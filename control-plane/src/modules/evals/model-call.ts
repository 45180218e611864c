import { PREFIX, ServiceError, deliveredText, randomId, type Clock, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { assertModelAllowed, assertRouteAllowed } from '../../http/key-bounds.ts';
import { guardRequest } from '../guardrails/enforce.ts';
import type { Mode } from '../guardrails/scanner.ts';
import { holdPrice } from '../inference/catalog.ts';
import type { InferenceService } from '../inference/service.ts';

/**
 * Model calls made inside the gateway for the quality features (eval cases, rubric graders, judge jurors):
 * one non-streamed chat completion through the same metered inference service as POST /v1/chat/completions,
 * under a key: held, settled on the real usage and receipted under that key, each with a request id of its
 * own (the receipt's id). The key's bounds apply as on a request of it: its mandate's model allow list, its
 * route allow list for the chat route (when the work is not itself a request of that key), and its policy
 * (models, output limit, guardrail rule sets, in the deployment's guardrails mode). Never a side door.
 */
export interface ModelCallDeps {
  inference: InferenceService;
  clock: Clock;
  publicUrl: URL;
  guardrailsMode: Mode;
}

export interface ModelAnswer {
  requestId: string;
  model: string;
  /** The first choice's text. */
  text: string;
  finishReason: string | null;
  receipt: SignedReceipt;
  costMicroUsd: number;
  /** Milliseconds from the call to its settled answer, on the gateway's clock. */
  latencyMs: number;
  /** The whole answer (chat.completion), for callers that read more than the first choice's text (replay fingerprints). */
  body: Record<string, unknown>;
}

export interface ModelCallOptions {
  /** What the usage event and the receipt record as the route (the request that caused the call). */
  route: string;
  /** Check the key's route allow list for POST /v1/chat/completions (work run later under a key, not a request of it). */
  checkChatRoute: boolean;
  signal?: AbortSignal;
}

const CHAT = '/v1/chat/completions';
const NEVER = new AbortController().signal;

/** Refusals that concern the caller's key, credit or bounds, not the one call: a run stops on them. */
export const CALLER_REFUSALS = new Set(['insufficient_credit', 'spend_cap_reached', 'circuit_breaker_tripped', 'invalid_credential', 'account_suspended', 'insufficient_scope', 'model_not_allowed', 'route_not_allowed']);

export const isCallerRefusal = (e: unknown): e is ServiceError => e instanceof ServiceError && CALLER_REFUSALS.has(e.type);

/** One metered chat completion under `p`; throws the inference service's ServiceError on failure. */
export async function chatUnderKey(d: ModelCallDeps, p: KeyPrincipal, body: Record<string, unknown>, opts: ModelCallOptions): Promise<ModelAnswer> {
  if (!p.scopes.includes('inference')) throw new ServiceError('insufficient_scope', 'This API key lacks the "inference" scope', { required_scope: 'inference' });
  if (opts.checkChatRoute) assertRouteAllowed(p, 'POST', CHAT);
  assertModelAllowed(p, String(body.model));
  const guard = guardRequest(p, 'chat.completions', body, d.guardrailsMode); // the key's policy, as on a request of it
  const requestId = PREFIX.request + randomId(20);
  const started = d.clock.now().getTime();
  const a = await d.inference.chat(p, body, {
    requestId,
    runId: null,
    route: opts.route,
    resource: new URL(CHAT, d.publicUrl).toString(),
    endpoint: 'chat.completions',
    signal: opts.signal ?? NEVER,
    guard,
  });
  const choice = (Array.isArray(a.body.choices) ? a.body.choices[0] : undefined) as { message?: { content?: unknown }; finish_reason?: string | null } | undefined;
  const content = choice?.message?.content;
  return {
    requestId,
    model: String(body.model),
    // The answer's content; only an answer without one (tool calls, a refusal) is read as delivered text.
    text: typeof content === 'string' ? content : deliveredText(choice?.message),
    finishReason: choice?.finish_reason ?? null,
    receipt: a.receipt,
    costMicroUsd: a.receipt.payload.cost_micro_usd,
    latencyMs: Math.max(0, d.clock.now().getTime() - started),
    body: a.body,
  };
}

/**
 * The most output tokens a call of `model` may ask for: `asked`, within the model's own bound (as the catalog
 * resolves it now). Throws the catalog's refusal (an unknown or non-chat model) for the caller to name its field.
 */
export async function outputBound(d: ModelCallDeps, model: string, asked: number): Promise<number> {
  const most = holdPrice(await d.inference.catalog.resolve(model, 'chat')).maxOutputTokens;
  return most === null ? asked : Math.min(asked, most);
}

/** A short, content-free account of a failed call: its error type and message (the gateway's words, not the model's). */
export function failureOf(e: unknown): { type: string; message: string } {
  if (e instanceof ServiceError) return { type: e.type, message: e.message.slice(0, 300) };
  return { type: 'internal_error', message: 'Internal error' };
}
