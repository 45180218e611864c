import { z } from 'zod';
import type { Clock } from '@svc/shared';
import type { ModelPrice, ProviderConfig, ProviderModel } from '../../config.ts';

/** How long one GET /v1/models may take before it counts as failed (and is retried at the next refresh). */
const LIST_TIMEOUT_MS = 10_000;
/** The most models taken from one upstream's list. */
const MAX_MODELS = 500;

const ModelList = z.object({ data: z.array(z.object({ id: z.string().min(1).max(200) }).loose()) }).loose();

export interface DiscoveryLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** A model an upstream lists now, with its price (the operator's, else zero). */
export interface DiscoveredModel {
  config: ProviderConfig;
  price: ModelPrice;
  /** The operator priced it (a `models` entry of SVC_PROVIDERS): its kind (chat or embeddings) is known. */
  priced: boolean;
}

interface ProviderState {
  config: ProviderConfig;
  /** The models listed at the last answer (kept through failed refreshes: a blip does not empty the catalog). */
  models: Map<string, DiscoveredModel>;
  /** When the next refresh is due (clock time, ms). */
  nextAt: number;
  /** Why the last refresh failed; null after an answer; undefined before the first. */
  failure: string | null | undefined;
}

const FREE: Omit<ModelPrice, 'embedding'> = { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, contextTokens: null, maxOutputTokens: null };

/** Why a fetch failed, in a few words (the cause's code or message, not a stack). */
function why(e: unknown): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError') return `no answer within ${LIST_TIMEOUT_MS / 1000} s`;
  return err?.cause?.code ?? err?.cause?.message ?? err?.message ?? String(e);
}

/**
 * The models of providers given by base URL alone (or `"discover": true`): asked of each upstream's own
 * `GET /v1/models` at boot and every `refreshMs` after (clock time; `tick` does what is due), priced by the
 * operator's entries and at zero otherwise. A model the upstream stops listing stops being listed here; an
 * upstream that does not answer keeps what it last listed (none at boot), is logged once per outage, and is
 * asked again at the next refresh. Each process asks for itself: the list is the upstream's, not state of ours.
 */
export class ModelDiscovery {
  private readonly providers: ProviderState[];
  private readonly pending: Array<['info' | 'warn', object, string]> = [];
  private logger: DiscoveryLog | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    providers: readonly ProviderConfig[],
    private readonly clock: Clock,
    private readonly refreshMs: number,
    private readonly fetchImpl: typeof fetch = (input, init) => fetch(input, init),
  ) {
    this.providers = providers.filter((p) => p.discover).map((config) => ({ config, models: new Map(), nextAt: 0, failure: undefined }));
  }

  get enabled(): boolean {
    return this.providers.length > 0;
  }

  /** Where log lines go; lines written before it was set (the boot's first listing) go out now. */
  set log(l: DiscoveryLog) {
    this.logger = l;
    for (const [level, obj, msg] of this.pending.splice(0)) l[level](obj, msg);
  }

  private say(level: 'info' | 'warn', obj: object, msg: string): void {
    if (this.logger) this.logger[level](obj, msg);
    else this.pending.push([level, obj, msg]);
  }

  /** Every discovered model now, each id once: the first provider in configuration order that lists it. */
  private index = new Map<string, DiscoveredModel>();

  models(): ReadonlyMap<string, DiscoveredModel> {
    return this.index;
  }

  /** The discovered model of this id, if an upstream lists it now. */
  get(id: string): DiscoveredModel | undefined {
    return this.index.get(id);
  }

  private reindex(): void {
    const index = new Map<string, DiscoveredModel>();
    for (const p of this.providers) for (const [id, m] of p.models) if (!index.has(id)) index.set(id, m);
    this.index = index;
  }

  /** Asks every discovering provider now, whatever is due. */
  refresh(): Promise<void> {
    return this.run(() => true);
  }

  /** Asks the providers whose refresh is due by the clock (tests move the clock, then call this). */
  tick(): Promise<void> {
    const now = this.clock.now().getTime();
    return this.run((p) => p.nextAt <= now);
  }

  /** One refresh at a time: a tick while one runs waits for it instead of asking twice. */
  private run(due: (p: ProviderState) => boolean): Promise<void> {
    this.running ??= Promise.all(this.providers.filter(due).map((p) => this.list(p))).then(
      () => void (this.running = null),
      () => void (this.running = null),
    );
    return this.running;
  }

  /** Refreshes on a timer (production); a timer too short to matter against refreshMs costs one map walk. */
  start(): void {
    if (!this.enabled || this.timer) return;
    this.timer = setInterval(() => void this.tick(), Math.min(this.refreshMs, 5_000));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async list(p: ProviderState): Promise<void> {
    const started = this.clock.now().getTime();
    p.nextAt = started + this.refreshMs;
    const url = `${p.config.baseUrl}/models`;
    let ids: string[];
    try {
      const res = await this.fetchImpl(url, { headers: { accept: 'application/json', ...(p.config.apiKey ? { authorization: `Bearer ${p.config.apiKey}` } : {}) }, signal: AbortSignal.timeout(LIST_TIMEOUT_MS) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const body = ModelList.safeParse(await res.json().catch(() => null));
      if (!body.success) throw new Error('the answer is not an OpenAI model list ({"data": [{"id": ...}]})');
      ids = [...new Set(body.data.data.map((m) => m.id))].slice(0, MAX_MODELS);
    } catch (e) {
      const failure = why(e);
      if (p.failure !== failure) {
        const kept = p.models.size ? `; still listing the ${p.models.size} models it listed before` : '; none of its models are listed';
        this.say('warn', { provider: p.config.name, url, err: failure }, `provider ${p.config.name}: GET ${url} failed (${failure})${kept}; asking again every ${this.refreshMs / 1000} s`);
      }
      p.failure = failure;
      return;
    }
    const prices = new Map(p.config.models.map((m) => [m.id, m]));
    const next = new Map<string, DiscoveredModel>(ids.map((id) => [id, model(p.config, id, prices.get(id))]));
    const added = ids.filter((id) => !p.models.has(id));
    const removed = [...p.models.keys()].filter((id) => !next.has(id));
    const first = p.failure === undefined;
    const recovered = p.failure !== null && !first;
    p.models = next;
    p.failure = null;
    this.reindex();
    if (!first && !recovered && added.length === 0 && removed.length === 0) return;
    const free = ids.filter((id) => !prices.has(id));
    const freeNote = free.length ? `; ${free.length === ids.length ? 'all' : free.length} priced at zero (${free.join(', ')}) until SVC_PROVIDERS prices them (docs/inference.md)` : '';
    const change = first || recovered ? '' : ` (${[added.length ? `added ${added.join(', ')}` : '', removed.length ? `gone ${removed.join(', ')}` : ''].filter(Boolean).join('; ')})`;
    this.say('info', { provider: p.config.name, url, models: ids, zero_priced: free }, `provider ${p.config.name}: ${ids.length} models from GET ${url}${change}${freeNote}`);
  }
}

function model(config: ProviderConfig, id: string, priced: ProviderModel | undefined): DiscoveredModel {
  if (priced) return { config, price: priced, priced: true };
  return { config, price: { ...FREE, embedding: false }, priced: false };
}
