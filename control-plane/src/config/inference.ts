import { z } from 'zod';
import { intWithDefault, jsonEnv } from './parse.ts';

/**
 * Upstream providers in SVC_PROVIDERS, OpenAI-compatible base URLs (ending in /v1), in one of two forms:
 * - base URLs alone, comma-separated (`http://127.0.0.1:11434/v1`): each provider's models are listed from its
 *   own `GET /v1/models`, priced at zero, and listed again every SVC_PROVIDERS_REFRESH_SECONDS;
 * - a JSON array, e.g. `[{"name":"openai","base_url":"https://api.openai.com/v1","api_key":"sk-...","models":[{"id":
 *   "gpt-4o-mini","input_micro_usd_per_mtok":150000,"output_micro_usd_per_mtok":600000,"max_output_tokens":16384}]}]`.
 *   A provider with `models` serves those, at those prices. One without `models`, or with `"discover": true`, lists
 *   what its upstream serves; its `models` entries then price the ones they name (the rest are free).
 * A model id belongs to one provider. Models served by enrolled inference nodes are priced by
 * SVC_NODE_MODEL_PRICES, `{"llama-3-8b":{"input_micro_usd_per_mtok":50000,"output_micro_usd_per_mtok":100000}}`;
 * a node model without a price is neither listed nor served. Optional per model: `context_tokens`,
 * `max_output_tokens`, `embedding: true` (served by /v1/embeddings only). Optional per provider:
 * `output_limit_field`, the field its chat endpoint reads the output bound from (`max_tokens` for Ollama, which
 * ignores `max_completion_tokens`; `max_completion_tokens` for OpenAI's own API, whose reasoning models refuse
 * `max_tokens`); without it the bound goes in the field the caller used.
 */
export interface ModelPrice {
  inputMicroUsdPerMtok: number;
  outputMicroUsdPerMtok: number;
  contextTokens: number | null;
  maxOutputTokens: number | null;
  /** An embeddings model (served by /v1/embeddings only). */
  embedding: boolean;
}
export interface ProviderModel extends ModelPrice {
  id: string;
}
export interface ProviderConfig {
  name: string;
  /** Without a trailing slash; paths such as /chat/completions are appended. */
  baseUrl: string;
  apiKey: string | undefined;
  /** The models it serves (fixed list), or, when `discover` is set, prices for the models its upstream lists. */
  models: ProviderModel[];
  /** List the models from the upstream's GET /v1/models (refreshed every `refreshMs` of InferenceConfig). */
  discover: boolean;
  /** The field this provider's chat endpoint reads the output bound from (a caller's bound is sent in it); null: as the caller sent it. */
  outputLimitField: OutputLimitField | null;
}
export type OutputLimitField = 'max_tokens' | 'max_completion_tokens';
export interface InferenceConfig {
  providers: ProviderConfig[];
  /** How often a discovering provider's model list is asked for again (and a failed one retried). */
  refreshMs: number;
  nodeModelPrices: Record<string, ModelPrice>;
  /** Upstream time limit: until the answer (non-streamed) or between two chunks of a stream. */
  timeoutMs: number;
  /** The longest a node's stream may run in all (its limit between two chunks is timeoutMs). */
  maxStreamMs: number;
  /** The output bound a hold assumes when neither the request nor the model gives one. */
  defaultMaxOutputTokens: number;
  /** A streaming caller that takes nothing of what was written for this long is disconnected (nginx's send_timeout). */
  stallMs: number;
}

const microPerMtok = z.number().int().min(0).max(1e12);
const PriceEntry = {
  input_micro_usd_per_mtok: microPerMtok,
  output_micro_usd_per_mtok: microPerMtok.default(0),
  context_tokens: z.number().int().min(1).max(1e8).optional(),
  max_output_tokens: z.number().int().min(1).max(1e8).optional(),
  embedding: z.boolean().optional(),
};
const baseUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL (OpenAI-compatible, ending in /v1)' });
const ProviderEntry = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'must be a lowercase name (letters, digits, . _ -; at most 64)'),
    base_url: baseUrl,
    api_key: z.string().min(1).optional(),
    output_limit_field: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
    /** Without models, the upstream's own list is used; with them and discover, they price what it lists. */
    discover: z.boolean().optional(),
    models: z.array(z.object({ id: z.string().min(1).max(200), ...PriceEntry }).strict()).max(500).optional(),
  })
  .strict()
  .refine((p) => p.discover !== false || (p.models?.length ?? 0) > 0, { message: 'a provider with "discover": false needs models', path: ['models'] });
/** Provider names are unique, and a model id belongs to one provider (chat, image and video lists alike). */
export function uniqueProviders(list: Array<{ name: string; models: Array<{ id: string }> }>, ctx: z.RefinementCtx): void {
  const names = new Set<string>();
  const models = new Map<string, string>();
  for (const [i, p] of list.entries()) {
    if (names.has(p.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate provider ${p.name}` });
    names.add(p.name);
    for (const [j, m] of p.models.entries()) {
      const other = models.get(m.id);
      if (other) ctx.addIssue({ code: 'custom', path: [i, 'models', j, 'id'], message: `model ${m.id} is already served by provider ${other}` });
      models.set(m.id, p.name);
    }
  }
}
const ProviderList = z
  .array(ProviderEntry)
  .max(64)
  .superRefine((list, ctx) => uniqueProviders(list.map((p) => ({ name: p.name, models: p.models ?? [] })), ctx));

/** A provider's name from its base URL alone: host and port, as a provider name may be written. */
function nameOf(url: URL, taken: Set<string>): string {
  const base = `${url.hostname}${url.port ? `-${url.port}` : ''}`.toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '').slice(0, 60) || 'provider';
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}-${i}`;
  taken.add(name);
  return name;
}

/** SVC_PROVIDERS as base URLs alone (comma- or space-separated): each a discovering provider named after its host. */
function urlList(raw: string, ctx: z.RefinementCtx): z.input<typeof ProviderList> {
  const taken = new Set<string>();
  const out: z.input<typeof ProviderList> = [];
  for (const [i, item] of raw.split(/[\s,]+/).filter(Boolean).entries()) {
    const r = baseUrl.safeParse(item);
    if (!r.success) {
      ctx.addIssue({ code: 'custom', message: `[${i}] ${JSON.stringify(item)}: must be an http(s) base URL (OpenAI-compatible, ending in /v1), or the whole value a JSON array of providers` });
      return [];
    }
    out.push({ name: nameOf(new URL(r.data), taken), base_url: r.data, discover: true });
  }
  return out;
}

const providerConfig = (list: z.infer<typeof ProviderList>): ProviderConfig[] =>
  list.map((p) => ({
    name: p.name,
    baseUrl: p.base_url.replace(/\/+$/, ''),
    apiKey: p.api_key,
    outputLimitField: p.output_limit_field ?? null,
    discover: p.discover ?? p.models === undefined,
    models: (p.models ?? []).map((m) => ({ id: m.id, ...modelPrice(m) })),
  }));

const jsonProviders = jsonEnv(ProviderList, [] as ProviderConfig[], 'a JSON array of providers', providerConfig);
/** SVC_PROVIDERS: a JSON array (it starts with `[`), else base URLs alone. */
const providersEnv = z
  .string()
  .optional()
  .transform((raw, ctx): ProviderConfig[] => {
    if (raw === undefined || raw.trim().startsWith('[')) {
      const r = jsonProviders.safeParse(raw);
      if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: 'custom', message: i.message });
      return r.success ? r.data : z.NEVER;
    }
    const list = urlList(raw, ctx);
    const r = ProviderList.safeParse(list);
    if (!r.success) {
      ctx.addIssue({ code: 'custom', message: r.error.issues[0]!.message });
      return z.NEVER;
    }
    return providerConfig(r.data);
  });
const NodePrices = z.record(z.string().min(1).max(200), z.object(PriceEntry).strict());

type PriceInput = { input_micro_usd_per_mtok: number; output_micro_usd_per_mtok: number; context_tokens?: number | undefined; max_output_tokens?: number | undefined; embedding?: boolean | undefined };
const modelPrice = (m: PriceInput): ModelPrice => ({
  inputMicroUsdPerMtok: m.input_micro_usd_per_mtok,
  outputMicroUsdPerMtok: m.output_micro_usd_per_mtok,
  contextTokens: m.context_tokens ?? null,
  maxOutputTokens: m.max_output_tokens ?? null,
  embedding: m.embedding === true,
});


export const inferenceEnv = {
  SVC_PROVIDERS: providersEnv,
  SVC_PROVIDERS_REFRESH_SECONDS: intWithDefault(60, 5, 86_400),
  SVC_NODE_MODEL_PRICES: jsonEnv(NodePrices, {} as Record<string, ModelPrice>, 'a JSON object of model id -> prices', (o) =>
    Object.fromEntries(Object.entries(o).map(([id, m]) => [id, modelPrice(m)])),
  ),
  SVC_INFERENCE_TIMEOUT_SECONDS: intWithDefault(300, 1, 3600),
  SVC_INFERENCE_MAX_STREAM_SECONDS: intWithDefault(3600, 1, 86_400),
  SVC_INFERENCE_DEFAULT_MAX_TOKENS: intWithDefault(4096, 1, 10_000_000),
  SVC_INFERENCE_STALL_SECONDS: intWithDefault(60, 1, 3600),
};

export function inferenceConfig(e: { SVC_PROVIDERS: ProviderConfig[]; SVC_PROVIDERS_REFRESH_SECONDS: number; SVC_NODE_MODEL_PRICES: Record<string, ModelPrice>; SVC_INFERENCE_TIMEOUT_SECONDS: number; SVC_INFERENCE_MAX_STREAM_SECONDS: number; SVC_INFERENCE_DEFAULT_MAX_TOKENS: number; SVC_INFERENCE_STALL_SECONDS: number }): InferenceConfig {
  const timeoutMs = e.SVC_INFERENCE_TIMEOUT_SECONDS * 1000;
  return { providers: e.SVC_PROVIDERS, refreshMs: e.SVC_PROVIDERS_REFRESH_SECONDS * 1000, nodeModelPrices: e.SVC_NODE_MODEL_PRICES, timeoutMs, maxStreamMs: Math.max(timeoutMs, e.SVC_INFERENCE_MAX_STREAM_SECONDS * 1000), defaultMaxOutputTokens: e.SVC_INFERENCE_DEFAULT_MAX_TOKENS, stallMs: e.SVC_INFERENCE_STALL_SECONDS * 1000 };
}
