import { ServiceError, type Clock } from '@svc/shared';
import type { InferenceConfig, ModelPrice, ProviderConfig } from '../../config.ts';
import type { NodeRegistry } from '../../fleet/registry.ts';
import { isEligible } from '../../fleet/scheduler.ts';
import { ModelDiscovery, type DiscoveredModel } from './discovery.ts';

/** Where a request for a model can go, resolved per request. */
export interface ResolvedModel {
  id: string;
  /** The configured upstream provider serving it, with its price, if any. */
  provider: { config: ProviderConfig; price: ModelPrice } | null;
  /** Eligible inference nodes serving it now (node id -> local model name) with the node price; null when none. */
  nodes: { localModels: Record<string, string>; price: ModelPrice } | null;
}

/** The price a hold assumes before the route is known: the dearer of the two. */
export function holdPrice(m: ResolvedModel): ModelPrice {
  const a = m.nodes?.price;
  const b = m.provider?.price;
  if (!a) return b!;
  if (!b) return a;
  return {
    ...b,
    inputMicroUsdPerMtok: Math.max(a.inputMicroUsdPerMtok, b.inputMicroUsdPerMtok),
    outputMicroUsdPerMtok: Math.max(a.outputMicroUsdPerMtok, b.outputMicroUsdPerMtok),
    maxOutputTokens: a.maxOutputTokens === null || b.maxOutputTokens === null ? null : Math.max(a.maxOutputTokens, b.maxOutputTokens),
  };
}

export interface CatalogEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  pricing: { input_micro_usd_per_mtok: number; output_micro_usd_per_mtok: number };
}

/**
 * The model catalog: models of configured providers (their fixed lists, and what discovering providers' upstreams
 * list now), and models declared by eligible (approved, online, not disabled or draining) inference nodes that
 * SVC_NODE_MODEL_PRICES prices. A model with neither is not listed and not served. A model both at a provider and
 * priced for nodes goes to an eligible node when there is one (at the node price), else to the provider (at the
 * provider price). A fixed list wins over a discovered model of the same id, and an earlier provider over a later.
 */
export class ModelCatalog {
  private readonly byProvider = new Map<string, DiscoveredModel>();
  private readonly created: number;
  /** The models of providers given by base URL alone (or `"discover": true`), listed from their upstreams. */
  readonly discovery: ModelDiscovery;

  constructor(
    private readonly cfg: InferenceConfig,
    private readonly registry: NodeRegistry,
    private readonly clock: Clock,
  ) {
    for (const config of cfg.providers) if (!config.discover) for (const m of config.models) this.byProvider.set(m.id, { config, price: m, priced: true });
    this.created = Math.floor(clock.now().getTime() / 1000);
    this.discovery = new ModelDiscovery(cfg.providers, clock, cfg.refreshMs);
  }

  /** The provider serving `id` now: a fixed list's, else the first discovering provider that lists it. */
  private provider(id: string): DiscoveredModel | undefined {
    return this.byProvider.get(id) ?? this.discovery.get(id);
  }

  /** Every provider model now, each id once (see provider()). */
  private providerModels(): Map<string, DiscoveredModel> {
    const all = new Map(this.byProvider);
    for (const [id, m] of this.discovery.models()) if (!all.has(id)) all.set(id, m);
    return all;
  }

  /**
   * Priced node models with eligible nodes: model -> (node id -> local name), from the scheduler's view of the
   * registry (registry.view.candidates: no read of every row per call); `whole` reads the registry whole first (a model
   * the view has no eligible node for, before it is answered unavailable).
   */
  private async eligibleNodes(only?: string, whole = false): Promise<Map<string, Record<string, string>>> {
    const now = this.clock.now();
    const out = new Map<string, Record<string, string>>();
    for (const n of whole ? await this.registry.view.snapshots() : await this.registry.view.candidates()) {
      for (const model of n.models) {
        if (!this.cfg.nodeModelPrices[model] || (only !== undefined && model !== only)) continue;
        if (!isEligible(n, { kind: 'inference', model }, now)) continue;
        const m = out.get(model) ?? {};
        m[n.id] = n.modelMap[model] ?? model;
        out.set(model, m);
      }
    }
    return out;
  }

  async list(): Promise<CatalogEntry[]> {
    const nodes = Object.keys(this.cfg.nodeModelPrices).length ? await this.eligibleNodes() : new Map<string, Record<string, string>>();
    const entry = (id: string, owner: string, p: ModelPrice): CatalogEntry => ({
      id,
      object: 'model',
      created: this.created,
      owned_by: owner,
      pricing: { input_micro_usd_per_mtok: p.inputMicroUsdPerMtok, output_micro_usd_per_mtok: p.outputMicroUsdPerMtok },
    });
    const out: CatalogEntry[] = [];
    for (const [id, { config, price }] of this.providerModels()) if (!nodes.has(id)) out.push(entry(id, config.name, price));
    for (const id of nodes.keys()) out.push(entry(id, 'fleet', this.cfg.nodeModelPrices[id]!));
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Resolves a requested model for chat or embeddings; unknown or unavailable models are 404, the wrong kind 400. */
  async resolve(id: string, use: 'chat' | 'embeddings'): Promise<ResolvedModel> {
    const found = this.provider(id);
    const provider = found ? { config: found.config, price: found.price } : null;
    const nodePrice = this.cfg.nodeModelPrices[id];
    const localModels = nodePrice ? ((await this.eligibleNodes(id)).get(id) ?? (await this.eligibleNodes(id, true)).get(id)) : undefined;
    const nodes = nodePrice && localModels ? { localModels, price: nodePrice } : null;
    if (!provider && !nodes) {
      throw new ServiceError('not_found', `The model "${id}" does not exist or is not available now; GET /v1/models lists the models served`, { param: 'model', code: 'model_not_found' });
    }
    // A model only discovered (an upstream's list says nothing of its kind) serves either route; its upstream refuses the wrong one.
    if (!nodes && found && !found.priced) return { id, provider, nodes };
    const embedding = (provider?.price ?? nodes!.price).embedding;
    if (use === 'chat' && embedding) throw new ServiceError('invalid_request', `The model "${id}" is an embeddings model; use POST /v1/embeddings`, { param: 'model' });
    if (use === 'embeddings' && !embedding) throw new ServiceError('invalid_request', `The model "${id}" is not an embeddings model`, { param: 'model' });
    return { id, provider, nodes };
  }
}
