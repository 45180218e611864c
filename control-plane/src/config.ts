import { isIP } from 'node:net';
import { z } from 'zod';
import { ConfigError, blankIsUnset, flag, hex32, intWithDefault, optionalSecret } from './config/parse.ts';
import { billingChains, billingChainsEnv, type ChainConfig } from './config/chains.ts';
import { inferenceConfig, inferenceEnv, type InferenceConfig } from './config/inference.ts';
import { notificationsEnv, type PlanConfig, type WebhookConfig } from './config/notifications.ts';
import { batchesConfig, batchesEnv, type BatchesConfig } from './config/batches.ts'; // files and batches
import { mediaConfig, mediaEnv, type MediaConfig } from './config/media.ts'; // media (images, videos, assistant)
import { passkeysConfig, passkeysEnv, type PasskeyConfig } from './config/passkeys.ts'; // passkeys
import { anchorsConfig, anchorsEnv, type AnchorsConfig } from './config/anchors.ts'; // public anchors
import { guardrailsConfig, guardrailsEnv, type GuardrailsConfig } from './config/guardrails.ts'; // guardrails
import { mcpConfig, mcpEnv, type McpConfig } from './config/mcp.ts'; // mcp
import { assetsConfig, assetsEnv, type AssetsConfig } from './config/assets.ts'; // asset proofs
import { legacyConfig, legacyEnv, type LegacyConfig } from './config/legacy.ts'; // legacy plans
import { marketConfig, marketEnv, type MarketConfig } from './config/market.ts'; // marketplace, agent post, relays
import { darkpoolConfig, darkpoolEnv, type DarkpoolConfig } from './config/darkpool.ts'; // dark pool
import { supportConfig, supportEnv, type SupportConfig } from './config/support.ts'; // holder support claims
import { arenaConfig, arenaEnv, type ArenaConfig } from './config/arena.ts'; // arena

export { ConfigError } from './config/parse.ts';
export type { ChainConfig } from './config/chains.ts';
export type { InferenceConfig, ModelPrice, OutputLimitField, ProviderConfig, ProviderModel } from './config/inference.ts';
export { DEFAULT_PLANS, type PlanConfig, type WebhookConfig } from './config/notifications.ts';
export type { PasskeyConfig } from './config/passkeys.ts';

/**
 * The one environment schema of the control plane. It is parsed once at boot; nothing else reads
 * process.env, and the parsed Config is passed into constructors so tests never touch the environment.
 * Each capability's variables live in config/<area>.ts and are spread in here.
 */
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
  SVC_CONSOLE_DIR: z.string().min(1).optional(), // console: the built console (npm run build:console); default console/dist of this checkout
  SVC_SEAL_KEY: hex32.optional(),
  SVC_SIGNER_KEY: hex32.optional(),
  SVC_PREPARED_NONCES: flag(true),
  // The signer (an address) and seal key (a fingerprint) the database records, named to be replaced (key-record.ts).
  SVC_SIGNER_ROTATE_FROM: z.preprocess(blankIsUnset, z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be the 0x-prefixed address of the recorded receipt signer').optional()),
  SVC_SEAL_REPLACE_FROM: z.preprocess(blankIsUnset, z.string().regex(/^[0-9a-fA-F]{32}$/, 'must be the recorded seal key fingerprint (32 hex digits)').optional()),
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
  SVC_BODY_DRAIN_BYTES: intWithDefault(32 * 1024 * 1024, 0),
  SVC_TRUSTED_PROXIES: z
    .string()
    .optional()
    .transform((s, ctx) => {
      const list = (s ?? '').split(',').map((x) => x.trim()).filter(Boolean);
      for (const x of list) if (!trustedProxy(x)) ctx.addIssue({ code: 'custom', message: `${x}: not an IP address, a CIDR block, loopback, linklocal or uniquelocal` });
      return list;
    }),
  SVC_LEADER_RETRY_SECONDS: intWithDefault(5, 1),
  SVC_HEALTH_SAMPLE_SECONDS: intWithDefault(60, 1),
  SVC_BILLING_ENFORCED: flag(false),
  SVC_HOLD_TTL_SECONDS: intWithDefault(900, 10),
  SVC_CREDIT_LEASE_SECONDS: intWithDefault(60, 0),
  SVC_SETTLE_BEHIND: flag(true),
  SVC_PENDING_SWEEP_SECONDS: intWithDefault(5, 1),
  SVC_SETTLE_GATHER_MS: intWithDefault(20, 1, 600_000),
  SVC_BREAKER_WINDOW_SECONDS: intWithDefault(60, 1),
  SVC_BREAKER_LIMIT_MICRO_USD: intWithDefault(100_000_000, 0),
  SVC_NOTARY_PRICE_MICRO_USD: intWithDefault(1_000, 0),
  SVC_TREASURY_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address').optional(),
  SVC_USDT_CONTRACT: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address').optional(),
  SVC_USDT_DECIMALS: intWithDefault(6, 0, 36),
  SVC_PAYMENT_NETWORK: z.string().regex(/^[a-z0-9:-]+$/, 'must be a network name such as base or eip155:8453').default('base'),
  // sandboxes
  SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: intWithDefault(100, 0),
  SVC_SANDBOX_MAX_TIMEOUT_SECONDS: intWithDefault(300, 1, 3600),
  SVC_SANDBOX_MEMORY_MB: intWithDefault(256, 16, 65536),
  SVC_SANDBOX_CPUS: z.coerce.number().min(0.05).max(64).default(1),
  SVC_SANDBOX_PIDS: intWithDefault(128, 8, 65536),
  SVC_SANDBOX_OUTPUT_BYTES: intWithDefault(1024 * 1024, 1024, 64 * 1024 * 1024),
  SVC_SANDBOX_NETWORK_ALLOWED: flag(false),
  SVC_SANDBOX_SESSION_IDLE_SECONDS: intWithDefault(600, 10, 86400),
  SVC_SANDBOX_TERMINAL_MAX_SECONDS: intWithDefault(600, 10, 86400),
  SVC_SANDBOX_TERMINAL_IDLE_SECONDS: intWithDefault(300, 10, 86400),
  SVC_SANDBOX_TERMINALS_PER_SESSION: intWithDefault(2, 1, 64),
  SVC_TERMINAL_ENABLED: flag(false),
  SVC_TERMINAL_DAILY_BUDGET_MICRO_USD: intWithDefault(1_000_000, 0),
  SVC_LOCAL_AGENT: z.enum(['auto', 'off']).default('auto'),
  SVC_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SVC_LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  NO_COLOR: z.string().optional(),
  SVC_STALL_TRACE_SECONDS: intWithDefault(0, 0),
  ...billingChainsEnv, // billing chains
  ...inferenceEnv, // inference
  ...notificationsEnv, // webhooks, plans and alerts
  ...batchesEnv, // files and batches
  ...mediaEnv, // media: image and video providers, the keyless assistant
  ...passkeysEnv, // passkeys: relying party id and origin
  ...anchorsEnv, // public anchors: chains and the paying key
  ...guardrailsEnv, // guardrails: SVC_GUARDRAILS_MODE
  ...mcpEnv, // mcp: sessions, upstream timeout, default price per call
  ...arenaEnv, // arena: declared suites and the runner account's key
  ...assetsEnv, // asset proofs: prices, freshness windows, the benchmark minimum cohort, HTTPS sources
  ...legacyEnv, // legacy plans: live plans per account, loop cadence
  ...marketEnv, // marketplace, agent post, relays: x402 terms, the facilitator key, inbox and relay limits
  ...darkpoolEnv, // dark pool: the operator's switch, the cash-leg chain, eligible assets, the match answer floor
  ...supportEnv, // holder support claims: the Solana RPC and token mint
});

export type Env = z.input<typeof EnvSchema>;

/** One entry of SVC_TRUSTED_PROXIES: an address, a CIDR block, or a named range (proxy-addr's). */
function trustedProxy(x: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(x)) return true;
  const [ip, bits, more] = x.split('/');
  const v = isIP(ip ?? '');
  if (!v || more !== undefined) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (v === 4 ? 32 : 128));
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  publicUrl: URL;
  /** Where the console's built assets are (index.html and assets/); undefined: console/dist of this checkout. */
  consoleDir: string | undefined; // console
  sealKey: `0x${string}` | undefined;
  signerKey: `0x${string}` | undefined;
  /** Receipts signed inline use ECDSA nonces prepared ahead on the signer's worker (off: RFC 6979 only). */
  preparedNonces: boolean;
  /** The recorded signer this process's signer replaces (a rotation), if named. */
  signerRotateFrom: string | undefined;
  /** The recorded seal key fingerprint this process's seal key replaces (a lost key), if named. */
  sealReplaceFrom: string | undefined;
  adminToken: string | undefined;
  metricsToken: string | undefined;
  siweChainIds: number[];
  sessionTtlSeconds: number;
  keyRotationGraceSeconds: number;
  bodyLimitBytes: number;
  /** How much of a refused request's unread body is read and dropped so its client reads the answer; past it the connection closes. */
  bodyDrainBytes: number;
  /**
   * Reverse proxies whose X-Forwarded-For is believed (SVC_TRUSTED_PROXIES); empty: none, and the client
   * address is the peer's. Behind a proxy without it every caller has the proxy's address.
   */
  trustedProxies: string[];
  leaderRetrySeconds: number;
  healthSampleSeconds: number;
  logLevel: string;
  /** auto: readable lines when stdout is a terminal, JSON otherwise; json or pretty: always that. */
  logFormat: 'auto' | 'json' | 'pretty';
  /** NO_COLOR is set: readable log lines without colour. */
  noColor: boolean;
  /** Log the main thread's stall trace this often (0: no trace); see modules/platform/stall-trace.ts. */
  stallTraceSeconds: number;
  billing: BillingConfig;
  sandbox: SandboxConfig;
  /** `npm start` runs a local node agent where Docker answers (auto), or never (off). */
  localAgent: boolean;
  /** EVM chains for deposits and payment requests (billing chains). */
  chains: ChainConfig[];
  /** SVC_DEPOSIT_SENDERS (billing chains). */
  depositSenders: 'linked' | 'any';
  /** Providers, node model prices and limits (inference). */
  inference: InferenceConfig;
  /** SVC_PLANS (subscriptions). */
  plans: PlanConfig[];
  /** SVC_BALANCE_LOW_DEFAULT_MICRO_USD (alerts). */
  balanceLowDefaultMicroUsd: number;
  /** SVC_WEBHOOK_TIMEOUT_SECONDS (webhooks). */
  webhooks: WebhookConfig;
  /** SVC_FILE_*, SVC_BATCH_* (files and batches). */
  batches: BatchesConfig;
  /** SVC_IMAGE_PROVIDERS, SVC_VIDEO_PROVIDERS, SVC_VIDEO_*, SVC_ASSISTANT_* (media). */
  media: MediaConfig;
  /** SVC_PASSKEY_RP_ID, SVC_PASSKEY_ORIGIN (passkeys); null: unconfigured, the passkey routes answer 404. */
  passkeys: PasskeyConfig | null;
  /** SVC_ANCHOR_* (public anchors). */
  anchors: AnchorsConfig;
  /** SVC_GUARDRAILS_MODE (guardrails). */
  guardrails: GuardrailsConfig;
  /** SVC_MCP_* (mcp). */
  mcp: McpConfig; // mcp
  /** SVC_ARENA_* (arena; no runner key: nothing runs). */
  arena: ArenaConfig; // arena
  /** SVC_ATTESTATION_*, SVC_NAV_*, SVC_BENCHMARK_*, SVC_ASSET_* (asset proofs). */
  assets: AssetsConfig; // asset proofs
  /** SVC_LEGACY_* (legacy plans). */
  legacy: LegacyConfig; // legacy plans
  /** SVC_MARKET_*, SVC_POST_*, SVC_RELAY_* (marketplace, agent post, relays). */
  market: MarketConfig; // marketplace
  /** SVC_DARKPOOL_* (dark pool; off unless enabled). */
  darkpool: DarkpoolConfig; // dark pool
  /** SVC_SUPPORT_* (holder support claims; null solana: unconfigured). */
  support: SupportConfig; // holder support claims
}

export interface SandboxConfig {
  pricePerSecondMicroUsd: number;
  maxTimeoutSeconds: number;
  limits: { memory_mb: number; cpus: number; pids: number; output_bytes: number };
  networkAllowed: boolean;
  sessionIdleSeconds: number;
  terminal: { enabled: boolean; dailyBudgetMicroUsd: number };
  /** Interactive terminals in sessions: wall-clock limit (within the hold TTL), idle limit, how many per session at once. */
  sessionTerminals: { maxSeconds: number; idleSeconds: number; perSession: number };
}

export interface BillingConfig {
  /** When false (the embedded default) everything is metered and receipted but never refused for credit. */
  enforced: boolean;
  holdTtlSeconds: number;
  /** Credit leases (money/leases.ts): their lifetime, renewed while in use; 0 turns them off. */
  leaseSeconds: number;
  /** Write-behind settles (money/write-behind.ts): lease-admitted inference answers once its settle is durable in Postgres. */
  settleBehind: boolean;
  /** How often the leader stores the pending settles of processes that are gone (default 5). */
  pendingSweepSeconds?: number;
  /** How long a durable write-behind settle waits for others to be stored with, in ms (default 20). */
  settleGatherMs?: number;
  /** Circuit breaker: a key whose spend within the window would exceed the limit is frozen. 0 disables. */
  breakerWindowSeconds: number;
  breakerLimitMicroUsd: number;
  notaryPriceMicroUsd: number;
  treasury: string | undefined;
  usdtContract: string | undefined;
  usdtDecimals: number;
  network: string;
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
  const passkeys = passkeysConfig(e); // passkeys
  if (passkeys.problems.length) throw new ConfigError(passkeys.problems);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.SVC_DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    publicUrl: new URL(e.SVC_PUBLIC_URL ?? `http://localhost:${e.PORT}`),
    consoleDir: e.SVC_CONSOLE_DIR, // console
    sealKey: e.SVC_SEAL_KEY,
    signerKey: e.SVC_SIGNER_KEY,
    preparedNonces: e.SVC_PREPARED_NONCES,
    signerRotateFrom: e.SVC_SIGNER_ROTATE_FROM,
    sealReplaceFrom: e.SVC_SEAL_REPLACE_FROM,
    adminToken: e.SVC_ADMIN_TOKEN,
    metricsToken: e.SVC_METRICS_TOKEN,
    siweChainIds: e.SVC_SIWE_CHAIN_IDS,
    sessionTtlSeconds: e.SVC_SESSION_TTL_SECONDS,
    keyRotationGraceSeconds: e.SVC_KEY_ROTATION_GRACE_SECONDS,
    bodyLimitBytes: e.SVC_BODY_LIMIT_BYTES,
    bodyDrainBytes: e.SVC_BODY_DRAIN_BYTES,
    trustedProxies: e.SVC_TRUSTED_PROXIES,
    leaderRetrySeconds: e.SVC_LEADER_RETRY_SECONDS,
    healthSampleSeconds: e.SVC_HEALTH_SAMPLE_SECONDS,
    logLevel: e.SVC_LOG_LEVEL,
    logFormat: e.SVC_LOG_FORMAT,
    noColor: e.NO_COLOR !== undefined,
    stallTraceSeconds: e.SVC_STALL_TRACE_SECONDS,
    localAgent: e.SVC_LOCAL_AGENT === 'auto',
    sandbox: {
      pricePerSecondMicroUsd: e.SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND,
      maxTimeoutSeconds: e.SVC_SANDBOX_MAX_TIMEOUT_SECONDS,
      limits: { memory_mb: e.SVC_SANDBOX_MEMORY_MB, cpus: e.SVC_SANDBOX_CPUS, pids: e.SVC_SANDBOX_PIDS, output_bytes: e.SVC_SANDBOX_OUTPUT_BYTES },
      networkAllowed: e.SVC_SANDBOX_NETWORK_ALLOWED,
      sessionIdleSeconds: e.SVC_SANDBOX_SESSION_IDLE_SECONDS,
      terminal: { enabled: e.SVC_TERMINAL_ENABLED, dailyBudgetMicroUsd: e.SVC_TERMINAL_DAILY_BUDGET_MICRO_USD },
      sessionTerminals: {
        // A terminal's hold lasts as long as it does: it must end before the hold expires.
        maxSeconds: Math.max(1, Math.min(e.SVC_SANDBOX_TERMINAL_MAX_SECONDS, e.SVC_HOLD_TTL_SECONDS - 60)),
        idleSeconds: e.SVC_SANDBOX_TERMINAL_IDLE_SECONDS,
        perSession: e.SVC_SANDBOX_TERMINALS_PER_SESSION,
      },
    },
    billing: {
      enforced: e.SVC_BILLING_ENFORCED,
      holdTtlSeconds: e.SVC_HOLD_TTL_SECONDS,
      leaseSeconds: Math.min(e.SVC_CREDIT_LEASE_SECONDS, e.SVC_HOLD_TTL_SECONDS),
      settleBehind: e.SVC_SETTLE_BEHIND,
      pendingSweepSeconds: e.SVC_PENDING_SWEEP_SECONDS,
      settleGatherMs: e.SVC_SETTLE_GATHER_MS,
      breakerWindowSeconds: e.SVC_BREAKER_WINDOW_SECONDS,
      breakerLimitMicroUsd: e.SVC_BREAKER_LIMIT_MICRO_USD,
      notaryPriceMicroUsd: e.SVC_NOTARY_PRICE_MICRO_USD,
      treasury: e.SVC_TREASURY_ADDRESS,
      usdtContract: e.SVC_USDT_CONTRACT,
      usdtDecimals: e.SVC_USDT_DECIMALS,
      network: e.SVC_PAYMENT_NETWORK,
    },
    chains: billingChains(e), // billing chains
    depositSenders: e.SVC_DEPOSIT_SENDERS, // billing chains
    inference: inferenceConfig(e), // inference
    plans: e.SVC_PLANS, // subscriptions
    balanceLowDefaultMicroUsd: e.SVC_BALANCE_LOW_DEFAULT_MICRO_USD, // alerts
    webhooks: { timeoutMs: e.SVC_WEBHOOK_TIMEOUT_SECONDS * 1000, allowPrivate: e.SVC_WEBHOOK_ALLOW_PRIVATE }, // webhooks
    batches: batchesConfig(e), // files and batches
    media: mediaConfig(e), // media (images, videos, assistant)
    passkeys: passkeys.config, // passkeys
    anchors: anchorsConfig(e), // public anchors
    guardrails: guardrailsConfig(e), // guardrails
    mcp: mcpConfig(e), // mcp
    arena: arenaConfig(e), // arena
    assets: assetsConfig(e), // asset proofs
    legacy: legacyConfig(e), // legacy plans
    market: marketConfig(e, e.SVC_CHAINS), // marketplace, agent post, relays
    darkpool: darkpoolConfig(e, e.SVC_CHAINS), // dark pool
    support: supportConfig(e), // holder support claims
  };
}
