import { PREFIX, ServiceError, randomId, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';
import { assertModelAllowed } from '../../http/key-bounds.ts';
import { guardRequest } from '../guardrails/enforce.ts';
import type { Mode } from '../guardrails/scanner.ts';
import type { InferenceService } from '../inference/service.ts';

/**
 * Embeddings made for memory (a document's chunks, a search query): one call through the same metered
 * inference service as POST /v1/embeddings, under the caller's key: held, settled on the upstream's usage,
 * recorded as a usage event and signed as a receipt of its own (its request id), like any embeddings request
 * of that key. The key's bounds apply as on such a request: its mandate's model allow list and its policy
 * (models, guardrail rule sets in the deployment's mode: the input is scanned, redacted in place or refused).
 */
export interface EmbedDeps {
  inference: InferenceService;
  publicUrl: URL;
  guardrailsMode: Mode;
}

export interface Embedded {
  /** The texts as embedded: the input after the key's guardrails redacted it. */
  texts: string[];
  vectors: number[][];
  requestId: string;
  receipt: SignedReceipt;
  promptTokens: number;
  costMicroUsd: number;
}

const EMBEDDINGS = '/v1/embeddings';

/** A vector as the upstream sent it: an array of numbers, or base64 of little-endian float32. */
function decode(v: unknown): number[] | null {
  if (Array.isArray(v)) return v.every((x) => typeof x === 'number' && Number.isFinite(x)) ? (v as number[]) : null;
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'base64');
    if (b.length === 0 || b.length % 4) return null;
    const out = Array.from({ length: b.length / 4 }, (_, i) => b.readFloatLE(i * 4));
    return out.every(Number.isFinite) ? out : null;
  }
  return null;
}

const badAnswer = (why: string) => new ServiceError('upstream_error', `The embeddings model's answer could not be stored: ${why}`);

export async function embedUnderKey(d: EmbedDeps, p: KeyPrincipal, model: string, input: string[], ctx: { route: string; runId: string | null; signal: CallerSignal }): Promise<Embedded> {
  assertModelAllowed(p, model);
  const body: Record<string, unknown> = { model, input: [...input], encoding_format: 'float' };
  const guard = guardRequest(p, 'embeddings', body, d.guardrailsMode); // the key's policy, as on a request of it
  const requestId = PREFIX.request + randomId(20);
  const a = await d.inference.embeddings(p, body, {
    requestId,
    runId: ctx.runId,
    route: ctx.route,
    resource: new URL(EMBEDDINGS, d.publicUrl).toString(),
    endpoint: 'embeddings',
    signal: ctx.signal,
    ...(guard ? { guard } : {}),
  });
  const texts = body.input as string[];
  const data = Array.isArray(a.body.data) ? (a.body.data as Array<{ index?: unknown; embedding?: unknown }>) : [];
  if (data.length !== texts.length) throw badAnswer(`${data.length} vectors for ${texts.length} inputs`);
  const vectors: number[][] = new Array(texts.length);
  for (const [i, item] of data.entries()) {
    const at = typeof item.index === 'number' ? item.index : i;
    const v = decode(item.embedding);
    if (!v || !Number.isInteger(at) || at < 0 || at >= texts.length || vectors[at]) throw badAnswer(`vector ${i} is missing or malformed`);
    vectors[at] = v;
  }
  const dims = vectors[0]!.length;
  if (vectors.some((v) => v.length !== dims)) throw badAnswer('its vectors differ in dimension');
  const usage = (a.body.usage ?? {}) as { prompt_tokens?: number };
  return { texts, vectors, requestId, receipt: a.receipt, promptTokens: usage.prompt_tokens ?? 0, costMicroUsd: a.receipt.payload.cost_micro_usd };
}
