import { ServiceError } from '@svc/shared';
import type { ModelPrice } from '../../config.ts';
import type { EngineParameters } from '../../db/schema-engine.ts';
import { holdPrice, type ModelCatalog } from '../inference/catalog.ts';
import { costMicroUsd } from '../inference/tokens.ts';
import type { ChatSpend } from '../money/chat-spend.ts';

/** A configuration evaluated: a catalog model with an engine build's prompt and parameters (none for a model called directly). */
export interface Configuration {
  model: string;
  systemPrompt: string | null;
  parameters: EngineParameters;
}

/** Where the account's chat traffic went: an engine slug, or a catalog model called directly. */
export interface Target {
  kind: 'engine' | 'model';
  /** The slug (engine) or the model. */
  key: string;
  /** What callers name: engine/<slug>, or the model. */
  name: string;
  requests: number;
  costMicroUsd: number;
  inputTokens: number;
  outputTokens: number;
}

export interface PricedModel {
  model: string;
  price: ModelPrice;
  /** What the target's window of tokens would cost at this model's price. */
  projected: number;
}

/** The account's chat spend grouped per target (an engine slug across the models its versions used), dearest first. */
export function targetsOf(spend: ChatSpend[]): Target[] {
  const byKey = new Map<string, Target>();
  for (const s of spend) {
    const kind = s.slug ? 'engine' : 'model';
    const key = s.slug ?? s.model;
    const id = `${kind}:${key}`;
    const t = byKey.get(id) ?? { kind, key, name: s.slug ? `engine/${s.slug}` : s.model, requests: 0, costMicroUsd: 0, inputTokens: 0, outputTokens: 0 };
    t.requests += s.requests;
    t.costMicroUsd += s.costMicroUsd;
    t.inputTokens += s.inputTokens;
    t.outputTokens += s.outputTokens;
    byKey.set(id, t);
  }
  return [...byKey.values()].sort((a, b) => b.costMicroUsd - a.costMicroUsd || (a.name < b.name ? -1 : 1));
}

/** A chat model of the catalog with its (hold) price, or null when it is not one now. */
async function chatPrice(catalog: ModelCatalog, model: string): Promise<ModelPrice | null> {
  try {
    return holdPrice(await catalog.resolve(model, 'chat'));
  } catch (e) {
    if (e instanceof ServiceError) return null;
    throw e;
  }
}

/**
 * The current model priced over the target's tokens, and the chat models of the catalog that would cost less
 * for the same tokens, cheapest first (at most `max`).
 */
export async function cheaperModels(catalog: ModelCatalog, t: Target, current: string, max: number): Promise<{ current: PricedModel; candidates: PricedModel[] } | null> {
  const price = await chatPrice(catalog, current);
  if (!price) return null;
  const priced = (model: string, p: ModelPrice): PricedModel => ({ model, price: p, projected: costMicroUsd(p, t.inputTokens, t.outputTokens) });
  const now = priced(current, price);
  const out: PricedModel[] = [];
  for (const entry of await catalog.list()) {
    if (entry.id === current) continue;
    const p = await chatPrice(catalog, entry.id);
    if (!p) continue;
    const c = priced(entry.id, p);
    if (c.projected < now.projected) out.push(c);
  }
  out.sort((a, b) => a.projected - b.projected || (a.model < b.model ? -1 : 1));
  return { current: now, candidates: out.slice(0, max) };
}
