import { z } from 'zod';

/**
 * The one environment schema of the control plane. It is parsed once at boot; nothing else reads
 * process.env, and the parsed Config is passed into constructors so tests never touch the environment.
 */
const optionalSecret = (name: string) =>
  z
    .string()
    .min(16, `${name} must be at least 16 characters`)
    .optional()
    .or(z.literal('').transform(() => undefined));

const hex32 = z
  .string()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, 'must be 32 bytes of hex (64 hex digits, optional 0x)')
  .transform((s) => (s.startsWith('0x') ? s : `0x${s}`) as `0x${string}`);

const intWithDefault = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(def);

/** A blank value means "unset": defaults apply and optional settings stay off. */
const blankIsUnset = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

// ---- billing chains (issue 4): begin ------------------------------------------------------------------
/**
 * EVM chains on which deposits and payment requests are verified, as JSON in SVC_CHAINS, e.g.
 * `[{"name":"base","chain_id":8453,"rpc_url":"https://...","usdt":"0x...","decimals":6,"confirmations":3}]`.
 * Every field is required except `min_deposit_micro_usd` (default 1). Unset or blank means no chains.
 * SVC_SOLANA is reserved: this build verifies no Solana transfers, so setting it stops boot rather than
 * advertising a payment method that could never be credited.
 */
export interface ChainConfig {
  name: string;
  chainId: number;
  rpcUrl: string;
  /** The USDT contract, lowercase 0x-hex. */
  usdt: `0x${string}`;
  decimals: number;
  confirmations: number;
  minDepositMicroUsd: number;
}

const ChainEntry = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be a lowercase name such as base (letters, digits, dashes; at most 32)'),
    chain_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    rpc_url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }),
    usdt: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address'),
    decimals: z.number().int().min(0).max(36),
    confirmations: z.number().int().min(1).max(10_000),
    min_deposit_micro_usd: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(1),
  })
  .strict();

const ChainList = z
  .array(ChainEntry)
  .max(32)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    for (const [i, c] of list.entries()) {
      for (const k of [`name:${c.name}`, `id:${c.chain_id}`]) {
        if (seen.has(k)) ctx.addIssue({ code: 'custom', path: [i], message: `duplicate ${k.replace(':', ' ')}` });
        seen.add(k);
      }
    }
  });

const billingChainsEnv = {
  SVC_CHAINS: z
    .string()
    .optional()
    .transform((raw, ctx): ChainConfig[] => {
      if (raw === undefined) return [];
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `must be a JSON array of chains (${(e as Error).message})` });
        return z.NEVER;
      }
      const r = ChainList.safeParse(json);
      if (!r.success) {
        const i = r.error.issues[0]!;
        const where = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
        ctx.addIssue({ code: 'custom', message: `${where ? `${where}: ` : ''}${i.message}` });
        return z.NEVER;
      }
      return r.data.map((c) => ({
        name: c.name,
        chainId: c.chain_id,
        rpcUrl: c.rpc_url,
        usdt: c.usdt.toLowerCase() as `0x${string}`,
        decimals: c.decimals,
        confirmations: c.confirmations,
        minDepositMicroUsd: c.min_deposit_micro_usd,
      }));
    }),
  SVC_SOLANA: z
    .string()
    .optional()
    .refine((v) => v === undefined, 'Solana deposits are not supported by this build; unset SVC_SOLANA'),
  /**
   * Who may claim a transfer to the treasury as a deposit: `linked` (default) credits only transfers sent
   * from a wallet linked to the submitting account, so nobody can claim another payer's transfer seen on
   * chain; `any` credits whichever account submits the transaction first.
   */
  SVC_DEPOSIT_SENDERS: z.enum(['linked', 'any']).default('linked'),
};

/** Cross-checks the chains against the x402 terms: a 402 must name a chain and token the gateway verifies. */
function billingChains(e: { SVC_CHAINS: ChainConfig[]; SVC_BILLING_ENFORCED: boolean; SVC_PAYMENT_NETWORK: string; SVC_USDT_CONTRACT?: string | undefined }): ChainConfig[] {
  const chains = e.SVC_CHAINS;
  if (chains.length === 0 || !e.SVC_BILLING_ENFORCED) return chains;
  const c = chains.find((x) => x.name === e.SVC_PAYMENT_NETWORK || `eip155:${x.chainId}` === e.SVC_PAYMENT_NETWORK);
  if (!c) throw new ConfigError([`SVC_PAYMENT_NETWORK: "${e.SVC_PAYMENT_NETWORK}" names no chain of SVC_CHAINS (${chains.map((x) => x.name).join(', ')})`]);
  if (e.SVC_USDT_CONTRACT && e.SVC_USDT_CONTRACT.toLowerCase() !== c.usdt) {
    throw new ConfigError([`SVC_USDT_CONTRACT: differs from the usdt of chain "${c.name}" in SVC_CHAINS`]);
  }
  return chains;
}
// ---- billing chains (issue 4): end --------------------------------------------------------------------

// ---- webhooks, plans and alerts (issue 4, items 3-5): begin -------------------------------------------
/**
 * Subscription plans as JSON in SVC_PLANS, e.g.
 * `[{"id":"free","name":"Free","monthly_fee_micro_usd":0,"retention_days":7,"limits":{},"features":{}}, ...]`.
 * A plan `free` with fee 0 is required (unpaid and cancelled subscriptions drop to it). `limits` maps a
 * limit name to a number (null: unlimited); `features` maps a feature name to a flag. Unset: DEFAULT_PLANS.
 */
export interface PlanConfig {
  id: string;
  name: string;
  monthlyFeeMicroUsd: number;
  retentionDays: number;
  limits: Record<string, number | null>;
  features: Record<string, boolean>;
}

export const DEFAULT_PLANS: PlanConfig[] = [
  {
    id: 'free',
    name: 'Free',
    monthlyFeeMicroUsd: 0,
    retentionDays: 7,
    limits: { api_keys: 5, webhooks: 2, sandbox_sessions: 1, requests_per_minute: 60 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: false, sla_reports: false, priority_support: false },
  },
  {
    id: 'pro',
    name: 'Pro',
    monthlyFeeMicroUsd: 20_000_000,
    retentionDays: 90,
    limits: { api_keys: 50, webhooks: 20, sandbox_sessions: 10, requests_per_minute: 600 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: true, sla_reports: true, priority_support: false },
  },
  {
    id: 'team',
    name: 'Team',
    monthlyFeeMicroUsd: 100_000_000,
    retentionDays: 365,
    limits: { api_keys: null, webhooks: 100, sandbox_sessions: 50, requests_per_minute: 3000 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: true, sla_reports: true, priority_support: true },
  },
];

const PlanEntry = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be a lowercase id such as pro (letters, digits, _ or -; at most 32)'),
    name: z.string().min(1).max(64),
    monthly_fee_micro_usd: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    retention_days: z.number().int().min(1).max(36_500),
    limits: z.record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/), z.number().int().min(0).nullable()).default({}),
    features: z.record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/), z.boolean()).default({}),
  })
  .strict();

const PlanList = z
  .array(PlanEntry)
  .min(1)
  .max(32)
  .superRefine((list, ctx) => {
    const ids = new Set<string>();
    for (const [i, p] of list.entries()) {
      if (ids.has(p.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate plan id ${p.id}` });
      ids.add(p.id);
    }
    const free = list.find((p) => p.id === 'free');
    if (!free) ctx.addIssue({ code: 'custom', message: 'needs a plan with id "free" (cancelled and unpaid subscriptions drop to it)' });
    else if (free.monthly_fee_micro_usd !== 0) ctx.addIssue({ code: 'custom', message: 'plan "free" must have monthly_fee_micro_usd 0' });
  });

const notificationsEnv = {
  SVC_PLANS: z
    .string()
    .optional()
    .transform((raw, ctx): PlanConfig[] => {
      if (raw === undefined) return DEFAULT_PLANS;
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `must be a JSON array of plans (${(e as Error).message})` });
        return z.NEVER;
      }
      const r = PlanList.safeParse(json);
      if (!r.success) {
        const i = r.error.issues[0]!;
        const where = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
        ctx.addIssue({ code: 'custom', message: `${where ? `${where}: ` : ''}${i.message}` });
        return z.NEVER;
      }
      return r.data.map((p) => ({ id: p.id, name: p.name, monthlyFeeMicroUsd: p.monthly_fee_micro_usd, retentionDays: p.retention_days, limits: p.limits, features: p.features }));
    }),
  /** The `balance_low` threshold of accounts that set none (PUT /v1/billing/alerts with null). Default $1. */
  SVC_BALANCE_LOW_DEFAULT_MICRO_USD: intWithDefault(1_000_000, 0),
  /** How long one webhook delivery attempt may take before it counts as failed. */
  SVC_WEBHOOK_TIMEOUT_SECONDS: intWithDefault(10, 1, 60),
};

export interface WebhookConfig {
  timeoutMs: number;
}
// ---- webhooks, plans and alerts (issue 4, items 3-5): end ---------------------------------------------

// ---- inference (issue 7): begin ------------------------------------------------------------------------
/**
 * Upstream providers as JSON in SVC_PROVIDERS: OpenAI-compatible base URLs (ending in /v1) with the models
 * each serves and their prices, e.g.
 * `[{"name":"openai","base_url":"https://api.openai.com/v1","api_key":"sk-...","models":[{"id":"gpt-4o-mini",
 * "input_micro_usd_per_mtok":150000,"output_micro_usd_per_mtok":600000,"max_output_tokens":16384}]}]`.
 * A model id belongs to one provider. Models served by enrolled inference nodes are priced by
 * SVC_NODE_MODEL_PRICES, `{"llama-3-8b":{"input_micro_usd_per_mtok":50000,"output_micro_usd_per_mtok":100000}}`;
 * a node model without a price is neither listed nor served. Optional per model: `context_tokens`,
 * `max_output_tokens`, `embedding: true` (served by /v1/embeddings only).
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
  models: ProviderModel[];
}
export interface InferenceConfig {
  providers: ProviderConfig[];
  nodeModelPrices: Record<string, ModelPrice>;
  /** Upstream time limit: until the answer (non-streamed) or between two chunks of a stream. */
  timeoutMs: number;
  /** The output bound a hold assumes when neither the request nor the model gives one. */
  defaultMaxOutputTokens: number;
}

const microPerMtok = z.number().int().min(0).max(1e12);
const PriceEntry = {
  input_micro_usd_per_mtok: microPerMtok,
  output_micro_usd_per_mtok: microPerMtok.default(0),
  context_tokens: z.number().int().min(1).max(1e8).optional(),
  max_output_tokens: z.number().int().min(1).max(1e8).optional(),
  embedding: z.boolean().optional(),
};
const ProviderEntry = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'must be a lowercase name (letters, digits, . _ -; at most 64)'),
    base_url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL (OpenAI-compatible, ending in /v1)' }),
    api_key: z.string().min(1).optional(),
    models: z.array(z.object({ id: z.string().min(1).max(200), ...PriceEntry }).strict()).min(1).max(500),
  })
  .strict();
const ProviderList = z
  .array(ProviderEntry)
  .max(64)
  .superRefine((list, ctx) => {
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

/** A JSON env value checked by a schema; the message names the failing path. */
function jsonEnv<S extends z.ZodType, T>(schema: S, empty: T, what: string, map: (v: z.infer<S>) => T) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): T => {
      if (raw === undefined) return empty;
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `must be ${what} (${(e as Error).message})` });
        return z.NEVER;
      }
      const r = schema.safeParse(json);
      if (!r.success) {
        const i = r.error.issues[0]!;
        const where = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
        ctx.addIssue({ code: 'custom', message: `${where ? `${where}: ` : ''}${i.message}` });
        return z.NEVER;
      }
      return map(r.data);
    });
}

const inferenceEnv = {
  SVC_PROVIDERS: jsonEnv(ProviderList, [] as ProviderConfig[], 'a JSON array of providers', (list) =>
    list.map((p) => ({ name: p.name, baseUrl: p.base_url.replace(/\/+$/, ''), apiKey: p.api_key, models: p.models.map((m) => ({ id: m.id, ...modelPrice(m) })) })),
  ),
  SVC_NODE_MODEL_PRICES: jsonEnv(NodePrices, {} as Record<string, ModelPrice>, 'a JSON object of model id -> prices', (o) =>
    Object.fromEntries(Object.entries(o).map(([id, m]) => [id, modelPrice(m)])),
  ),
  SVC_INFERENCE_TIMEOUT_SECONDS: intWithDefault(300, 1, 3600),
  SVC_INFERENCE_DEFAULT_MAX_TOKENS: intWithDefault(4096, 1, 10_000_000),
};

function inferenceConfig(e: { SVC_PROVIDERS: ProviderConfig[]; SVC_NODE_MODEL_PRICES: Record<string, ModelPrice>; SVC_INFERENCE_TIMEOUT_SECONDS: number; SVC_INFERENCE_DEFAULT_MAX_TOKENS: number }): InferenceConfig {
  return { providers: e.SVC_PROVIDERS, nodeModelPrices: e.SVC_NODE_MODEL_PRICES, timeoutMs: e.SVC_INFERENCE_TIMEOUT_SECONDS * 1000, defaultMaxOutputTokens: e.SVC_INFERENCE_DEFAULT_MAX_TOKENS };
}
// ---- inference (issue 7): end --------------------------------------------------------------------------

const EnvSchema = z.object({
  PORT: intWithDefault(8080, 0, 65535),
  HOST: z.string().min(1).default('127.0.0.1'),
  SVC_DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  SVC_PUBLIC_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  SVC_SEAL_KEY: hex32.optional(),
  SVC_SIGNER_KEY: hex32.optional(),
  SVC_ADMIN_TOKEN: optionalSecret('SVC_ADMIN_TOKEN'),
  SVC_METRICS_TOKEN: optionalSecret('SVC_METRICS_TOKEN'),
  SVC_SIWE_CHAIN_IDS: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be a comma-separated list of chain ids')
    .default('1')
    .transform((s) => s.split(',').map(Number)),
  SVC_SESSION_TTL_SECONDS: intWithDefault(30 * 24 * 3600, 60),
  SVC_KEY_ROTATION_GRACE_SECONDS: intWithDefault(24 * 3600, 0),
  SVC_BODY_LIMIT_BYTES: intWithDefault(1024 * 1024, 1024),
  SVC_LEADER_RETRY_SECONDS: intWithDefault(5, 1),
  SVC_HEALTH_SAMPLE_SECONDS: intWithDefault(60, 1),
  SVC_BILLING_ENFORCED: z.enum(['true', 'false', '1', '0']).default('false').transform((v) => v === 'true' || v === '1'),
  SVC_HOLD_TTL_SECONDS: intWithDefault(900, 10),
  SVC_BREAKER_WINDOW_SECONDS: intWithDefault(60, 1),
  SVC_BREAKER_LIMIT_MICRO_USD: intWithDefault(100_000_000, 0),
  SVC_NOTARY_PRICE_MICRO_USD: intWithDefault(1_000, 0),
  SVC_TREASURY_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address').optional(),
  SVC_USDT_CONTRACT: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address').optional(),
  SVC_USDT_DECIMALS: intWithDefault(6, 0, 36),
  SVC_PAYMENT_NETWORK: z.string().regex(/^[a-z0-9:-]+$/, 'must be a network name such as base or eip155:8453').default('base'),
  // sandboxes (issue 6)
  SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: intWithDefault(100, 0),
  SVC_SANDBOX_MAX_TIMEOUT_SECONDS: intWithDefault(300, 1, 3600),
  SVC_SANDBOX_MEMORY_MB: intWithDefault(256, 16, 65536),
  SVC_SANDBOX_CPUS: z.coerce.number().min(0.05).max(64).default(1),
  SVC_SANDBOX_PIDS: intWithDefault(128, 8, 65536),
  SVC_SANDBOX_OUTPUT_BYTES: intWithDefault(1024 * 1024, 1024, 64 * 1024 * 1024),
  SVC_SANDBOX_NETWORK_ALLOWED: z.enum(['true', 'false', '1', '0']).default('false').transform((v) => v === 'true' || v === '1'),
  SVC_SANDBOX_SESSION_IDLE_SECONDS: intWithDefault(600, 10, 86400),
  SVC_TERMINAL_ENABLED: z.enum(['true', 'false', '1', '0']).default('false').transform((v) => v === 'true' || v === '1'),
  SVC_TERMINAL_DAILY_BUDGET_MICRO_USD: intWithDefault(1_000_000, 0),
  SVC_LOCAL_AGENT: z.enum(['auto', 'off']).default('auto'),
  SVC_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ...billingChainsEnv, // billing chains (issue 4)
  ...inferenceEnv, // inference (issue 7)
  ...notificationsEnv, // webhooks, plans and alerts (issue 4, items 3-5)
});

export type Env = z.input<typeof EnvSchema>;

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  publicUrl: URL;
  sealKey: `0x${string}` | undefined;
  signerKey: `0x${string}` | undefined;
  adminToken: string | undefined;
  metricsToken: string | undefined;
  siweChainIds: number[];
  sessionTtlSeconds: number;
  keyRotationGraceSeconds: number;
  bodyLimitBytes: number;
  leaderRetrySeconds: number;
  healthSampleSeconds: number;
  logLevel: string;
  billing: BillingConfig;
  sandbox: SandboxConfig;
  /** `npm start` runs a local node agent where Docker answers (auto), or never (off). */
  localAgent: boolean;
  /** EVM chains for deposits and payment requests (billing chains, issue 4). */
  chains: ChainConfig[];
  /** SVC_DEPOSIT_SENDERS (billing chains, issue 4). */
  depositSenders: 'linked' | 'any';
  /** Providers, node model prices and limits (inference, issue 7). */
  inference: InferenceConfig;
  /** SVC_PLANS (subscriptions, issue 4 item 5). */
  plans: PlanConfig[];
  /** SVC_BALANCE_LOW_DEFAULT_MICRO_USD (alerts, issue 4 item 4). */
  balanceLowDefaultMicroUsd: number;
  /** SVC_WEBHOOK_TIMEOUT_SECONDS (webhooks, issue 4 item 3). */
  webhooks: WebhookConfig;
}

export interface SandboxConfig {
  pricePerSecondMicroUsd: number;
  maxTimeoutSeconds: number;
  limits: { memory_mb: number; cpus: number; pids: number; output_bytes: number };
  networkAllowed: boolean;
  sessionIdleSeconds: number;
  terminal: { enabled: boolean; dailyBudgetMicroUsd: number };
}

export interface BillingConfig {
  /** When false (the embedded default) everything is metered and receipted but never refused for credit. */
  enforced: boolean;
  holdTtlSeconds: number;
  /** Circuit breaker: a key whose spend within the window would exceed the limit is frozen. 0 disables. */
  breakerWindowSeconds: number;
  breakerLimitMicroUsd: number;
  notaryPriceMicroUsd: number;
  treasury: string | undefined;
  usdtContract: string | undefined;
  usdtDecimals: number;
  network: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/** Parses an environment; a bad value throws a ConfigError whose message names the variable. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const picked: Record<string, string | undefined> = {};
  for (const k of Object.keys(EnvSchema.shape)) picked[k] = blankIsUnset(env[k]) as string | undefined;
  const r = EnvSchema.safeParse(picked);
  if (!r.success) {
    throw new ConfigError(r.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`));
  }
  const e = r.data;
  if (e.SVC_BILLING_ENFORCED && (!e.SVC_TREASURY_ADDRESS || !e.SVC_USDT_CONTRACT)) {
    throw new ConfigError(['SVC_BILLING_ENFORCED: needs SVC_TREASURY_ADDRESS and SVC_USDT_CONTRACT for the 402 payment terms']);
  }
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.SVC_DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    publicUrl: new URL(e.SVC_PUBLIC_URL ?? `http://localhost:${e.PORT}`),
    sealKey: e.SVC_SEAL_KEY,
    signerKey: e.SVC_SIGNER_KEY,
    adminToken: e.SVC_ADMIN_TOKEN,
    metricsToken: e.SVC_METRICS_TOKEN,
    siweChainIds: e.SVC_SIWE_CHAIN_IDS,
    sessionTtlSeconds: e.SVC_SESSION_TTL_SECONDS,
    keyRotationGraceSeconds: e.SVC_KEY_ROTATION_GRACE_SECONDS,
    bodyLimitBytes: e.SVC_BODY_LIMIT_BYTES,
    leaderRetrySeconds: e.SVC_LEADER_RETRY_SECONDS,
    healthSampleSeconds: e.SVC_HEALTH_SAMPLE_SECONDS,
    logLevel: e.SVC_LOG_LEVEL,
    localAgent: e.SVC_LOCAL_AGENT === 'auto',
    sandbox: {
      pricePerSecondMicroUsd: e.SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND,
      maxTimeoutSeconds: e.SVC_SANDBOX_MAX_TIMEOUT_SECONDS,
      limits: { memory_mb: e.SVC_SANDBOX_MEMORY_MB, cpus: e.SVC_SANDBOX_CPUS, pids: e.SVC_SANDBOX_PIDS, output_bytes: e.SVC_SANDBOX_OUTPUT_BYTES },
      networkAllowed: e.SVC_SANDBOX_NETWORK_ALLOWED,
      sessionIdleSeconds: e.SVC_SANDBOX_SESSION_IDLE_SECONDS,
      terminal: { enabled: e.SVC_TERMINAL_ENABLED, dailyBudgetMicroUsd: e.SVC_TERMINAL_DAILY_BUDGET_MICRO_USD },
    },
    billing: {
      enforced: e.SVC_BILLING_ENFORCED,
      holdTtlSeconds: e.SVC_HOLD_TTL_SECONDS,
      breakerWindowSeconds: e.SVC_BREAKER_WINDOW_SECONDS,
      breakerLimitMicroUsd: e.SVC_BREAKER_LIMIT_MICRO_USD,
      notaryPriceMicroUsd: e.SVC_NOTARY_PRICE_MICRO_USD,
      treasury: e.SVC_TREASURY_ADDRESS,
      usdtContract: e.SVC_USDT_CONTRACT,
      usdtDecimals: e.SVC_USDT_DECIMALS,
      network: e.SVC_PAYMENT_NETWORK,
    },
    chains: billingChains(e), // billing chains (issue 4)
    depositSenders: e.SVC_DEPOSIT_SENDERS, // billing chains (issue 4)
    inference: inferenceConfig(e), // inference (issue 7)
    plans: e.SVC_PLANS, // subscriptions (issue 4 item 5)
    balanceLowDefaultMicroUsd: e.SVC_BALANCE_LOW_DEFAULT_MICRO_USD, // alerts (issue 4 item 4)
    webhooks: { timeoutMs: e.SVC_WEBHOOK_TIMEOUT_SECONDS * 1000 }, // webhooks (issue 4 item 3)
  };
}
