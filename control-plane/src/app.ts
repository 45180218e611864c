import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { serializerCompiler } from 'fastify-type-provider-zod';
import { PREFIX, randomId, type Clock } from '@svc/shared';
import type { Config } from './config.ts';
import type { Metrics } from './metrics.ts';
import { registerAuth } from './http/auth.ts';
import { registerBodyParsers, requestValidator } from './http/body.ts';
import { errorHandling, MAX_PARAM_LENGTH } from './http/errors.ts';
import { refuseNulInPathParams } from './http/path-params.ts';
import { registerOpenApi } from './http/openapi.ts';
import type { DenylistService } from './modules/admin/denylist.ts';
import { adminRoutes, type AdminMetricsSource } from './modules/admin/routes.ts';
import type { IdentityService } from './modules/identity/service.ts';
import { identityRoutes } from './modules/identity/routes.ts';
import type { KeysService } from './modules/keys/service.ts';
import { keysRoutes } from './modules/keys/routes.ts';
import type { HealthService } from './modules/platform/health.ts';
import { platformRoutes } from './modules/platform/routes.ts';
import { stallTrace, type SchedSample } from './modules/platform/stall-trace.ts';
import type { Database } from './db/database.ts';
import type { Cursors } from './http/cursor.ts';
import type { Metering } from './modules/money/metering.ts';
import type { ReceiptSigner } from './modules/money/signer.ts';
import type { NotaryService } from './modules/notary/service.ts';
import { notaryRoutes } from './modules/notary/routes.ts';
import { proofsRoutes } from './modules/proofs/routes.ts';
import { escrowRoutes } from './modules/escrow/routes.ts'; // escrow claims
import { moneyRoutes } from './modules/money/routes.ts';
import { billingRoutes } from './modules/billing/routes.ts';
import { payRoutes } from './modules/pay/routes.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';
import type { WebhookService } from './modules/webhooks/service.ts';
import { alertRoutes } from './modules/alerts/routes.ts';
import type { AlertsService } from './modules/alerts/service.ts';
import { subscriptionRoutes } from './modules/subscriptions/routes.ts';
import type { SubscriptionService } from './modules/subscriptions/service.ts';
import { fleetRoutes } from './modules/fleet/routes.ts';
import { sandboxRoutes } from './modules/sandboxes/routes.ts';
import type { SandboxDeps } from './modules/sandboxes/deps.ts';
import { inferenceRoutes } from './modules/inference/routes.ts'; // inference
import type { InferenceService } from './modules/inference/service.ts'; // inference
import type { NodeRegistry } from './fleet/registry.ts';
import { batchRoutes } from './modules/batches/routes.ts'; // files and batches
import type { BatchDeps } from './modules/batches/deps.ts'; // files and batches
import { mediaRoutes } from './modules/media/routes.ts'; // media (images, videos, assistant)
import type { Media } from './modules/media/deps.ts'; // media
import { orgRoutes } from './modules/orgs/routes.ts';
import { sourcesRoutes } from './modules/sources/routes.ts'; // source sets
import type { SourcesService } from './modules/sources/service.ts'; // source sets
import type { OrgsService } from './modules/orgs/service.ts';
import type { OrgInvites } from './modules/orgs/invites.ts';
import type { OrgSessionEnds } from './modules/orgs/session-ends.ts';
import { assertOrgRoute } from './modules/orgs/roles.ts';
import { oauthRoutes } from './modules/oauth/routes.ts'; // oauth
import type { OAuthService } from './modules/oauth/service.ts'; // oauth
import type { OAuthGrants } from './modules/oauth/grants.ts'; // oauth
import { passkeyRoutes } from './modules/passkeys/routes.ts'; // passkeys
import type { PasskeysService } from './modules/passkeys/service.ts'; // passkeys
import { anchorsRoutes } from './modules/anchors/routes.ts'; // public anchors
import type { Anchors } from './modules/anchors/service.ts'; // public anchors
import { callsRoutes } from './modules/calls/routes.ts'; // sealed calls
import type { CallsService } from './modules/calls/service.ts'; // sealed calls
import { vaultRoutes } from './modules/vault/routes.ts'; // vault
import type { Vault } from './modules/vault/deps.ts'; // vault
import { pagesRoutes } from './modules/pages/routes.ts'; // sealed calls: public pages /c/{id}, /r/{request_id}
import { explorerRoutes } from './modules/explorer/routes.ts'; // explorer
import type { Explorer } from './modules/explorer/service.ts'; // explorer
import { passportsRoutes } from './modules/passports/routes.ts'; // passports
import type { PassportsService } from './modules/passports/service.ts'; // passports
import { kyaRoutes } from './modules/kya/routes.ts'; // passports: KYA credentials
import { guardrailsRoutes } from './modules/guardrails/routes.ts'; // guardrails
import type { GuardrailsService } from './modules/guardrails/service.ts'; // guardrails
import { policiesRoutes } from './modules/policies/routes.ts'; // policies
import type { PoliciesService } from './modules/policies/service.ts'; // policies
import type { KyaService } from './modules/kya/service.ts'; // passports: KYA credentials
import { mandatesRoutes } from './modules/mandates/routes.ts'; // mandates
import type { MandatesService } from './modules/mandates/service.ts'; // mandates
import { ghostRoutes } from './modules/ghost/routes.ts'; // mandates: ghost sessions
import type { GhostService } from './modules/ghost/service.ts'; // mandates: ghost sessions
import { evalsRoutes } from './modules/evals/routes.ts'; // quality
import type { Evals } from './modules/evals/deps.ts'; // quality
import { judgeRoutes } from './modules/judge/routes.ts'; // quality
import type { JudgeService } from './modules/judge/service.ts'; // quality
import { mcpRoutes } from './modules/mcp/routes.ts'; // mcp
import type { Mcp } from './modules/mcp/deps.ts'; // mcp
import { memoryRoutes } from './modules/memory/routes.ts'; // memory
import type { MemoryService } from './modules/memory/service.ts'; // memory
import { engineRoutes } from './modules/engine/routes.ts'; // engine builds
import type { EngineService } from './modules/engine/service.ts'; // engine builds
import { replayRoutes } from './modules/replay/routes.ts'; // replay capsules
import type { ReplayService } from './modules/replay/service.ts'; // replay capsules
import { autopilotRoutes } from './modules/autopilot/routes.ts'; // autopilot
import type { AutopilotService } from './modules/autopilot/service.ts'; // autopilot
import { arenaRoutes } from './modules/arena/routes.ts'; // arena
import type { ArenaService } from './modules/arena/service.ts'; // arena
import { stateRoutes } from './modules/state/routes.ts'; // state
import type { StateService } from './modules/state/service.ts'; // state
import { attestationsRoutes } from './modules/attestations/routes.ts'; // attestations
import type { AttestationsService } from './modules/attestations/service.ts'; // attestations
import { navRoutes } from './modules/nav/routes.ts'; // nav
import type { NavService } from './modules/nav/service.ts'; // nav
import { benchmarksRoutes } from './modules/benchmarks/routes.ts'; // benchmarks
import type { BenchmarksService } from './modules/benchmarks/service.ts'; // benchmarks
import { agentsRoutes } from './modules/agents/routes.ts'; // agents
import type { Agents } from './modules/agents/create.ts'; // agents
import { servicesRoutes } from './modules/services/routes.ts'; // marketplace
import type { Services } from './modules/services/deps.ts'; // marketplace
import { postRoutes } from './modules/post/routes.ts'; // agent post
import type { PostService } from './modules/post/service.ts'; // agent post
import { relaysRoutes } from './modules/relays/routes.ts'; // relays
import type { RelaysService } from './modules/relays/service.ts'; // relays
import { withUrlRedaction } from './http/log-redaction.ts';
import { registerRequestLog } from './http/request-log.ts'; // agents: hook tokens kept out of request logs
import { legacyRoutes } from './modules/legacy/routes.ts'; // legacy plans
import type { Legacy } from './modules/legacy/deps.ts'; // legacy plans
import { darkpoolRoutes } from './modules/darkpool/routes.ts'; // dark pool
import type { Darkpool } from './modules/darkpool/deps.ts'; // dark pool
import { supportRoutes } from './modules/support/routes.ts'; // holder support claims
import { consoleRoutes } from './modules/console/routes.ts'; // console
import type { SupportService } from './modules/support/service.ts'; // holder support claims


/** The main thread's scheduler counters at each traced request's start (the stall trace; empty when it is off). */
const schedAtStart = new WeakMap<object, SchedSample | null>();
export const VERSION = '0.1.0';

export interface RouteEntry {
  method: string;
  url: string;
  auth: string;
  scope: string | undefined;
  hidden: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route the router serves, as registered (HEAD twins excluded). */
    routeTable: RouteEntry[];
  }
}

export interface AppDeps {
  config: Config;
  clock: Clock;
  metrics: Metrics;
  identity: IdentityService;
  keys: KeysService;
  denylist: DenylistService;
  health: HealthService;
  adminMetrics: AdminMetricsSource;
  signer: ReceiptSigner;
  metering: Metering;
  notary: NotaryService;
  cursors: Cursors;
  database: Database;
  registry: NodeRegistry;
  sandboxes: SandboxDeps;
  inference: InferenceService; // inference
  webhooks: WebhookService; // webhooks
  alerts: AlertsService; // balance alerts
  subscriptions: SubscriptionService; // plans and subscriptions
  batches: BatchDeps; // files and batches
  media: Media; // media (images, videos, assistant)
  orgs: { service: OrgsService; invites: OrgInvites; sessionEnds: OrgSessionEnds };
  sources: SourcesService; // source sets
  oauth: { service: OAuthService; grants: OAuthGrants }; // oauth: the authorization server for connectors
  anchors: Anchors; // public anchors of proof artifacts
  calls: CallsService; // sealed calls
  vault: Vault; // vault: private assets, positions, claims, attesters, documents, view grants
  explorer: Explorer; // explorer
  passports: { passports: PassportsService; kya: KyaService }; // passports and KYA credentials
  guardrails: { guardrails: GuardrailsService; policies: PoliciesService }; // guardrails, policies
  passkeys: PasskeysService | null; // passkeys: null where SVC_PASSKEY_* are unset (routes answer 404)
  mandates: { mandates: MandatesService; ghosts: GhostService }; // mandates and ghost sessions
  quality: { evals: Evals; judge: JudgeService }; // quality: eval suites, drift monitors, judge verdicts
  mcp: Mcp; // mcp: the remote MCP server, the gateway and registrations
  memory: MemoryService; // memory: semantic memory collections
  engine: EngineService; // engine builds: named configurations called as engine/<slug>
  replay: ReplayService; // replay capsules: recorded requests re-run on demand
  autopilot: AutopilotService; // autopilot: cheaper configurations proposed with evidence
  arena: ArenaService; // arena: declared suites run by the runner account, the public leaderboard
  state: StateService; // state: durable key-value state
  attestations: AttestationsService; // attestations: signed records of on-chain facts
  nav: NavService; // nav: private NAV, published versions
  benchmarks: BenchmarksService; // benchmarks: portfolio benchmarks against peer cohorts
  agents: Agents; // agents: hosted agents, their hooks and mailboxes
  services: Services; // marketplace: published services paid inline by x402
  post: PostService; // agent post: paid mail between passport handles
  relays: RelaysService; // relays: sealed temporary shares
  legacy: Legacy; // legacy plans: owners, attesters, beneficiaries, the public claim link
  darkpool: Darkpool; // dark pool: intents and matches (501 unless enabled)
  support: SupportService; // holder support claims (501 without a Solana RPC)
  logger?: boolean | object;
}

/** Builds the Fastify app: cross-cutting plugins first, then each module's routes. */
export async function buildApp(d: AppDeps): Promise<FastifyInstance> {
  const newRequestId = () => PREFIX.request + randomId(20);
  const errors = errorHandling({ drainBytes: d.config.bodyDrainBytes, newRequestId });
  const app = Fastify({
    logger: withUrlRedaction(d.logger ?? { level: d.config.logLevel }), // path tokens (agent hooks, invites) never reach a log
    logController: new LogController({ disableRequestLogging: true }), // one line per request instead, at its end (http/request-log.ts)
    bodyLimit: d.config.bodyLimitBytes,
    genReqId: newRequestId,
    trustProxy: d.config.trustedProxies.length ? d.config.trustedProxies : false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: errors.frameworkErrors,
    clientErrorHandler: errors.clientError,
  });
  const routeTable: RouteEntry[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) {
      if (method === 'HEAD') continue;
      routeTable.push({ method, url: r.url, auth: r.config?.auth ?? '', scope: r.config?.scope, hidden: Boolean((r.schema as { hide?: boolean } | undefined)?.hide) });
    }
  });
  app.setValidatorCompiler(requestValidator);
  app.setSerializerCompiler(serializerCompiler);

  errors.register(app);
  refuseNulInPathParams(app); // before authentication: no route, however it answers its errors, sees a NUL in its path
  registerRequestLog(app);
  registerBodyParsers(app, d.denylist);
  registerAuth(app, {
    resolvers: { apiKey: (s) => d.keys.authenticate(s), session: async (t) => d.orgs.service.resolveSession(await d.identity.authenticate(t)), nodeKey: (s) => d.registry.authenticate(s), oauthAccessToken: (t) => d.oauth.service.authenticate(t) },
    adminToken: d.config.adminToken,
    metricsToken: d.config.metricsToken,
    publicOrigin: d.config.publicUrl.origin,
    readBarrier: (accountId) => d.metering.settled(accountId),
    orgRouteGate: assertOrgRoute,
  });
  d.orgs.sessionEnds.register(app); // after the auth hook: open requests of an org session end with it
  await registerOpenApi(app, VERSION);

  // Callback hooks, not async ones: these run on every request and need no promise or microtask turn.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    if (stallTrace.enabled) schedAtStart.set(req, stallTrace.requestStart());
    done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    d.metrics.httpRequests.inc({ method: req.method, route, status: `${Math.floor(reply.statusCode / 100)}xx` });
    d.metrics.httpDuration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
    if (stallTrace.enabled) stallTrace.request(reply.elapsedTime, undefined, schedAtStart.get(req) ?? null);
    done();
  });

  platformRoutes(app, { health: d.health, metrics: d.metrics, clock: d.clock, info: { name: 'svc gateway', version: VERSION, publicUrl: d.config.publicUrl } });
  adminRoutes(app, { identity: d.identity, denylist: d.denylist, metrics: d.adminMetrics });
  identityRoutes(app, d.identity, { secureCookie: d.config.publicUrl.protocol === 'https:', sessionTtlSeconds: d.config.sessionTtlSeconds, passkey: d.passkeys !== null });
  passkeyRoutes(app, d.passkeys, { secureCookie: d.config.publicUrl.protocol === 'https:', sessionTtlSeconds: d.config.sessionTtlSeconds }); // passkeys
  keysRoutes(app, d.keys);
  mandatesRoutes(app, d.mandates.mandates); // mandates
  ghostRoutes(app, d.mandates.ghosts); // mandates: ghost sessions
  orgRoutes(app, d.orgs.service, d.orgs.invites);
  sourcesRoutes(app, d.sources); // source sets
  oauthRoutes(app, { ...d.oauth, db: d.database.db, clock: d.clock, publicUrl: d.config.publicUrl, signIn: { chainIds: d.config.siweChainIds, passkey: d.passkeys !== null } }); // oauth
  notaryRoutes(app, d.notary, d.config.publicUrl);
  escrowRoutes(app, { db: d.database.db, clock: d.clock, signer: d.signer, publicUrl: d.config.publicUrl }); // escrow claims
  fleetRoutes(app, { registry: d.registry, version: VERSION });
  sandboxRoutes(app, d.sandboxes);
  inferenceRoutes(app, { service: d.inference, publicUrl: d.config.publicUrl, stallMs: d.config.inference.stallMs, sources: d.sources, guardrailsMode: d.config.guardrails.mode }); // inference; a call may cite a source set; guardrails: a key's policy enforced
  guardrailsRoutes(app, d.guardrails.guardrails); // guardrails
  policiesRoutes(app, d.guardrails.policies); // policies
  batchRoutes(app, d.batches); // files and batches
  mediaRoutes(app, d.media); // media (images, videos, assistant)
  moneyRoutes(app, { metering: d.metering, cursors: d.cursors, db: d.database.db, clock: d.clock, signer: d.signer, database: d.database });
  billingRoutes(app, { config: d.config, db: d.database.db, clock: d.clock, metering: d.metering, identity: d.identity });
  payRoutes(app, { config: d.config, db: d.database.db, clock: d.clock, signer: d.signer });
  webhookRoutes(app, d.webhooks);
  alertRoutes(app, d.alerts);
  subscriptionRoutes(app, d.subscriptions);
  proofsRoutes(app, { db: d.database.db, clock: d.clock, signer: d.signer, health: d.health, publicUrl: d.config.publicUrl, anchors: d.anchors });
  anchorsRoutes(app, d.anchors); // public anchors
  callsRoutes(app, d.calls); // sealed calls
  vaultRoutes(app, d.vault); // vault
  pagesRoutes(app, { db: d.database.db, clock: d.clock, signer: d.signer, calls: d.calls, anchors: d.anchors, publicUrl: d.config.publicUrl }); // sealed calls: public pages
  explorerRoutes(app, d.explorer); // explorer
  passportsRoutes(app, d.passports.passports, d.passports.kya); // passports
  kyaRoutes(app, d.passports.kya); // passports: KYA credentials
  evalsRoutes(app, d.quality.evals); // quality
  judgeRoutes(app, { judge: d.quality.judge, signerAddress: d.signer.address }); // quality: judge verdicts and the page /j/{id}
  mcpRoutes(app, { ...d.mcp, publicUrl: d.config.publicUrl, version: VERSION }); // mcp
  memoryRoutes(app, d.memory); // memory
  engineRoutes(app, d.engine); // engine builds
  replayRoutes(app, d.replay); // replay capsules
  autopilotRoutes(app, d.autopilot); // autopilot
  arenaRoutes(app, d.arena); // arena
  stateRoutes(app, d.state); // state
  attestationsRoutes(app, d.attestations); // attestations
  navRoutes(app, d.nav); // nav
  benchmarksRoutes(app, d.benchmarks); // benchmarks
  agentsRoutes(app, d.agents); // agents
  servicesRoutes(app, d.services); // marketplace
  postRoutes(app, d.post); // agent post
  relaysRoutes(app, d.relays); // relays
  legacyRoutes(app, d.legacy); // legacy plans and the page /legacy/claim/{token}
  darkpoolRoutes(app, d.darkpool); // dark pool
  supportRoutes(app, d.support); // holder support claims
  consoleRoutes(app, { dir: d.config.consoleDir, publicUrl: d.config.publicUrl }); // console: the web console at /console

  await app.ready();
  return app;
}
