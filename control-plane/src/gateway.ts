import type { FastifyInstance } from 'fastify';
import { newId, privateKeyToAddress, systemClock, type Clock } from '@svc/shared';
import type { Config } from './config.ts';
import { buildApp } from './app.ts';
import { openDatabase, type Database } from './db/database.ts';
import { migrateToLatest } from './db/migrate.ts';
import type { StepFault } from './jobs/faults.ts';
import { Leader } from './jobs/leader.ts';
import { sealKey, signerKey } from './key-files.ts';
import { checkKeyRecord, type KeyRecordChange } from './key-record.ts';
import { Metrics } from './metrics.ts';
import { DenylistService } from './modules/admin/denylist.ts';
import { IdentityService } from './modules/identity/service.ts';
import { KeysService } from './modules/keys/service.ts';
import { HealthService } from './modules/platform/health.ts';
import { Metering } from './modules/money/metering.ts';
import { LEASES_CHANNEL } from './modules/money/leases.ts';
import { ReceiptSigner } from './modules/money/signer.ts';
import { Anchors, anchorBackends } from './modules/anchors/service.ts'; // public anchors
import { Explorer } from './modules/explorer/service.ts'; // explorer
import { publicBase } from './modules/proofs/deps.ts';
import { NotaryService } from './modules/notary/service.ts';
import { CallsService } from './modules/calls/service.ts'; // sealed calls
import { createVault } from './modules/vault/deps.ts'; // vault
import { Cursors } from './http/cursor.ts';
import { UsageService } from './modules/money/usage.ts';
import { NodeRegistry } from './fleet/registry.ts';
import { AgentHub } from './fleet/hub.ts';
import { FleetRelay } from './fleet/relay.ts';
import { attachAgentChannel } from './fleet/channel.ts';
import { Idempotency } from './http/idempotency.ts';
import { SandboxExecutor } from './modules/sandboxes/executor.ts';
import { RunRecords } from './modules/sandboxes/records.ts';
import { SandboxSessions } from './modules/sandboxes/sessions.ts';
import { ensureTerminalAccount } from './modules/sandboxes/terminal.ts';
import { SessionTerminals } from './modules/sandboxes/session-terminals.ts'; // sandbox terminals
import type { SandboxDeps } from './modules/sandboxes/deps.ts';
import { createInference } from './modules/inference/deps.ts'; // inference
import type { InferenceService } from './modules/inference/service.ts';
import { WebhookService } from './modules/webhooks/service.ts';
import { WebhookSender } from './modules/webhooks/sender.ts';
import type { SelfAddress } from './modules/webhooks/url.ts';
import { AlertsService } from './modules/alerts/service.ts';
import { SubscriptionService } from './modules/subscriptions/service.ts';
import { createBatches } from './modules/batches/deps.ts'; // files and batches
import { SWEEP_EVERY_MS } from './modules/files/upload.ts';
import { createMedia } from './modules/media/deps.ts'; // media (images, videos, assistant)
import { OrgsService } from './modules/orgs/service.ts';
import { OrgInvites } from './modules/orgs/invites.ts';
import { OrgSessionEnds } from './modules/orgs/session-ends.ts';
import { SourcesService } from './modules/sources/service.ts'; // source sets
import { OAuthService } from './modules/oauth/service.ts'; // oauth
import { OAuthGrants } from './modules/oauth/grants.ts'; // oauth
import { PassportsService } from './modules/passports/service.ts'; // passports
import { KyaService } from './modules/kya/service.ts'; // passports: KYA credentials
import { GuardrailsService } from './modules/guardrails/service.ts'; // guardrails
import { PoliciesService } from './modules/policies/service.ts'; // policies
import { MandatesService } from './modules/mandates/service.ts'; // mandates
import { GhostService } from './modules/ghost/service.ts'; // mandates: ghost sessions
import { StateService } from './modules/state/service.ts'; // state
import { createLegacy } from './modules/legacy/deps.ts'; // legacy plans
import type { Legacy } from './modules/legacy/deps.ts'; // legacy plans: the gateway's handle for tests
import { createDarkpool, type Darkpool } from './modules/darkpool/deps.ts'; // dark pool
import { SupportService } from './modules/support/service.ts'; // holder support claims
import { createEvals } from './modules/evals/deps.ts'; // quality
import { JudgeService } from './modules/judge/service.ts'; // quality
import { createMcp } from './modules/mcp/deps.ts'; // mcp
import { MemoryService } from './modules/memory/service.ts'; // memory
import { createAgents, type Agents } from './modules/agents/create.ts'; // agents
import { createServices } from './modules/services/deps.ts'; // marketplace
import { createPost } from './modules/post/deps.ts'; // agent post
import { RelaysService } from './modules/relays/service.ts'; // relays
import { EngineService } from './modules/engine/service.ts'; // engine builds
import { ReplayService } from './modules/replay/service.ts'; // replay capsules
import { AutopilotService } from './modules/autopilot/service.ts'; // autopilot
import { ArenaService } from './modules/arena/service.ts'; // arena
import { Receipts } from './modules/proofs/receipts.ts'; // arena: task receipts shared publicly
import { Checker } from './modules/attestations/checker.ts'; // attestations
import { AttestationsService } from './modules/attestations/service.ts'; // attestations
import { NavService } from './modules/nav/service.ts'; // nav
import { ChainRegistry } from './modules/billing/chains.ts'; // nav: chains of the on-chain supply
import { BenchmarksService } from './modules/benchmarks/service.ts'; // benchmarks

/** How long boot waits for the discovering providers' first model lists. */
const DISCOVERY_BOOT_WAIT_MS = 3_000;

export interface GatewayOptions {
  clock?: Clock;
  /** Run the leader's loops on timers (production). Tests drive them with `leader.runAllOnce()`. */
  loopTimers?: boolean;
  logger?: boolean | object;
  /** Use an in-memory embedded database instead of the data directory (tests). */
  memoryDatabase?: boolean;
  /** How long a job waits for its dropped agent to reconnect before it counts as lost. */
  reconnectGraceMs?: number;
  /** Test seam: called between the steps of leader work; a throw stands for the process dying there. */
  stepFault?: StepFault;
}

export interface Gateway {
  app: FastifyInstance;
  config: Config;
  database: Database;
  leader: Leader;
  services: {
    identity: IdentityService;
    keys: KeysService;
    denylist: DenylistService;
    health: HealthService;
    metering: Metering;
    signer: ReceiptSigner;
    webhooks: WebhookService;
    webhookSender: WebhookSender;
    alerts: AlertsService;
    subscriptions: SubscriptionService;
    inference: InferenceService;
    /** Interactive terminals into sandbox sessions open on this process. */
    terminals: SessionTerminals;
  };
  fleet: { registry: NodeRegistry; hub: AgentHub };
  /** Public anchors of proof artifacts. */
  anchors: Anchors;
  /** Memory collections (their vector store, for tests and the benchmark). */
  memory: MemoryService; // memory
  /** Hosted agents: their run queue and scheduler (tests drive the queue across processes). */
  agents: Agents; // agents
  /** Legacy plans: tests drive the lifecycle loop directly, several ticks at once. */
  legacy: Legacy; // legacy plans
  /** The dark pool: tests trace how its questions were answered. */
  darkpool: Darkpool; // dark pool
  signerKey: `0x${string}`;
  sealKey: Uint8Array;
  /** Listens on config.host:config.port; returns the bound base URL. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** Wires storage, services, jobs and the HTTP app of one control-plane process. */
export async function createGateway(config: Config, opts: GatewayOptions = {}): Promise<Gateway> {
  const clock = opts.clock ?? systemClock;
  const processId = newId('proc_', 12);
  const signer = signerKey(config.signerKey, config.dataDir);
  const seal = sealKey(config.sealKey, config.dataDir);

  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, memory: opts.memoryDatabase });
  let keyChanges: KeyRecordChange[];
  try {
    await migrateToLatest(database.db);
    // Every replica on this database has these keys, or this one refuses to boot (a ConfigError naming the variable).
    keyChanges = await checkKeyRecord(
      database.db,
      {
        signerAddress: privateKeyToAddress(signer),
        sealKey: seal,
        configured: { signer: config.signerKey !== undefined, seal: config.sealKey !== undefined },
        dataDir: config.dataDir,
        signerRotateFrom: config.signerRotateFrom,
        sealReplaceFrom: config.sealReplaceFrom,
      },
      clock.now(),
    );
  } catch (e) {
    await database.close();
    throw e;
  }
  const { db } = database;
  const metrics = new Metrics();
  const keys = new KeysService(db, clock, { rotationGraceSeconds: config.keyRotationGraceSeconds });
  await keys.start(database);
  const identity = new IdentityService(db, clock, {
    siwe: { publicUrl: config.publicUrl, chainIds: config.siweChainIds },
    sessionTtlSeconds: config.sessionTtlSeconds,
    onAccountChanged: (id) => keys.accountChanged(id),
  });
  const orgSessionEnds = new OrgSessionEnds();
  await orgSessionEnds.start(database);
  const orgs = { service: new OrgsService(db, clock, identity, orgSessionEnds), invites: new OrgInvites(db, clock, identity), sessionEnds: orgSessionEnds };
  // passkeys: the WebAuthn library loads only where SVC_PASSKEY_* configure them (the routes answer 404 elsewhere)
  const passkeys = config.passkeys ? new (await import('./modules/passkeys/service.ts')).PasskeysService(db, clock, identity, config.passkeys) : null;
  const sources = new SourcesService(db, clock, config.publicUrl); // source sets
  const denylist = new DenylistService(db, clock);
  await denylist.start(database);
  const health = new HealthService(db, clock, processId, config.healthSampleSeconds);
  // The signer's worker and its prepared nonces start with the first receipt, not at boot: an idle process holds no worker thread.
  const signerSvc = new ReceiptSigner(signer, { preparedNonces: config.preparedNonces, warmOnFirstUse: true });
  const metering = new Metering(db, clock, signerSvc, config.billing, config.billing.settleBehind ? { processId: database.processId, asyncCommit: database.asyncCommit } : null, { error: (o, m) => app.log.error(o, m) });
  metering.refreshPrincipal = (p) => keys.refreshPrincipal(p);
  keys.onChange((target) => metering.leases.dropFor(target)); // a revoked, frozen, rotated or re-capped key's leases go back
  const guardrails = new GuardrailsService(db, clock, config.guardrails.mode, (id) => keys.accountChanged(id)); // guardrails
  const policies = new PoliciesService(db, clock, guardrails, (id) => keys.accountChanged(id)); // policies
  keys.policies = policies; // policies: attached where keys are minted, resolved with a key's credentials
  keys.onChange((target) => policies.invalidate(target)); // policies: compiled policies go with the keys' cache, in every process (NOTIFY)
  const unlistenLeases = await database.listen(LEASES_CHANNEL, (accountId) => void metering.leases.returnAccount(accountId));
  const anchors = new Anchors(db, clock, config.anchors, await anchorBackends(config.anchors), (err, msg) => app.log.warn({ err }, msg)); // public anchors
  const explorer = new Explorer(db, clock, publicBase(config.publicUrl)); // explorer
  const notary = new NotaryService(db, metering, config.billing.notaryPriceMicroUsd, anchors);
  const calls = new CallsService({ db, clock, signer: signerSvc, sealKey: seal, anchors, identity, publicUrl: config.publicUrl }); // sealed calls
  explorer.register('sealed_calls', calls.explorerSource()); // explorer
  const vault = createVault({ db, clock, signer: signerSvc, sealKey: seal, anchors, identity, publicUrl: config.publicUrl }); // vault
  explorer.register('vault', vault.explorerSource()); // vault
  const passportsSvc = new PassportsService({ db, clock, signer: signerSvc, anchors, publicUrl: config.publicUrl }); // passports
  explorer.register('passports', passportsSvc.explorerSource()); // explorer
  const passports = { passports: passportsSvc, kya: new KyaService({ db, clock, signer: signerSvc, keys, passports: passportsSvc, policies }) }; // passports: KYA credentials
  const mandates = { mandates: new MandatesService({ db, clock, keys, identity, signer: signerSvc }), ghosts: new GhostService({ db, clock, keys, identity }) }; // mandates and ghost sessions
  const state = new StateService({ db, clock, sealKey: seal, identity }); // state
  const legacy = createLegacy({ db, clock, sealKey: seal, anchors, identity, publicUrl: config.publicUrl, config: config.legacy, stepFault: opts.stepFault }); // legacy plans
  const darkpool = createDarkpool({ db, clock, sealKey: seal, signer: signerSvc, identity, config: config.darkpool }); // dark pool
  const support = new SupportService({ db, clock, signer: signerSvc, config: config.support, publicUrl: config.publicUrl }); // holder support claims
  const cursors = new Cursors(seal);
  const usageReport = new UsageService(db, clock, cursors, signerSvc);
  const registry = new NodeRegistry(db, clock, database.processId);
  keys.onChange((target) => registry.view.keys.drop(target)); // node keys of a suspended owner are refused at once, in every process (NOTIFY)
  const processes = { processId: database.processId, alive: (ids: readonly string[]) => database.processesAlive(ids) };
  const idempotency = new Idempotency(db, clock, processes);
  const records = new RunRecords(db);
  // Several processes on one Postgres dispatch to each other's agent channels; the embedded database serves one process.
  const relay = database.kind === 'postgres' ? new FleetRelay(database, (err, what) => app.log.error({ err }, what)) : null;
  const hub = new AgentHub(registry, db, clock, opts.reconnectGraceMs, relay);
  const executor = new SandboxExecutor(hub, metering, records, clock, config.sandbox);
  const sandboxSessions = new SandboxSessions(db, clock, hub, registry, config.sandbox);
  const sandboxes: SandboxDeps = {
    db,
    clock,
    config: config.sandbox,
    executor,
    sessions: sandboxSessions,
    terminals: new SessionTerminals({ clock, config: config.sandbox, executor, sessions: sandboxSessions, publicUrl: config.publicUrl }), // sandbox terminals
    records,
    idempotency,
    publicUrl: config.publicUrl,
  };
  if (config.sandbox.terminal.enabled) await ensureTerminalAccount(db, clock.now());
  const agents = createAgents({ db, clock, sealKey: seal, keys, identity, executor, sandbox: config.sandbox, publicUrl: config.publicUrl, processId: database.processId, stepFault: opts.stepFault, log: { warn: (o, m) => app.log.warn(o, m), error: (o, m) => app.log.error(o, m) } }); // agents
  explorer.register('agents', agents.explorerSource()); // agents
  const inference = createInference(config.inference, { hub, registry, metering, clock }); // inference
  const discovery = inference.catalog.discovery; // inference: providers given by base URL alone list their upstreams' models
  const discovered = discovery.refresh(); // asked while the rest boots
  const engine = new EngineService({ db, clock, sealKey: seal, catalog: inference.catalog, policies }); // engine builds
  inference.engines = engine; // engine builds: engine/<slug> on the chat completions, Messages and Responses routes
  // webhooks, balance alerts, plans and subscriptions
  const self: SelfAddress = { publicUrl: config.publicUrl, port: config.port, host: config.host, allowPrivate: config.webhooks.allowPrivate }; // listening: set once the server listens
  const webhooks = new WebhookService(db, clock, seal, self);
  const webhookSender = new WebhookSender(db, clock, seal, { timeoutMs: config.webhooks.timeoutMs, self });
  const services = await createServices({ db, clock, sealKey: seal, signer: signerSvc, identity, passports: passportsSvc, agents, config: config.market, self, publicUrl: config.publicUrl }); // marketplace: services paid by x402
  const post = createPost({ db, clock, sealKey: seal, signer: signerSvc, billing: config.billing, metering, cursors, identity, passports: passportsSvc, config: config.market, publicUrl: config.publicUrl }); // agent post: postage through the ledger
  const relays = new RelaysService({ db, clock, sealKey: seal, publicUrl: config.publicUrl, pinAttempts: config.market.relayPinAttempts }); // relays
  const oauth = { service: new OAuthService({ db, clock, keys, publicUrl: config.publicUrl, self }), grants: new OAuthGrants(db, clock, config.publicUrl, seal) }; // oauth
  const mcp = createMcp({ config: config.mcp, db, clock, sealKey: seal, self, publicUrl: config.publicUrl, metering, signerAddress: signerSvc.address, inference, sandboxes, identity, guardrailsMode: config.guardrails.mode, log: { error: (o, m) => app.log.error(o, m) } }); // mcp
  await mcp.servers.start(database); // mcp: registrations cached per process, dropped on NOTIFY
  const memory = new MemoryService({ db, clock, sealKey: seal, embed: { inference, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode } }); // memory
  const alerts = new AlertsService(db, clock, webhooks, config.balanceLowDefaultMicroUsd, { warn: (o, m) => app.log.warn(o, m) });
  metering.onBalance(alerts.observe);
  const evals = createEvals({ db, clock, keys, inference, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode, events: webhooks, processes, stepFault: opts.stepFault, log: { warn: (o, m) => app.log.warn(o, m) } }); // quality
  const replay = new ReplayService({ db, clock, sealKey: seal, keys, calls: { inference, clock, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode } }); // replay capsules
  const autopilot = new AutopilotService({ db, clock, keys, catalog: inference.catalog, engine, evals: evals.evals, replay, calls: { inference, clock, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode } }); // autopilot
  const arenaReceipts = new Receipts(db, clock, signerSvc.address, publicBase(config.publicUrl)); // arena
  const arena = new ArenaService({ db, clock, config: config.arena, keys, catalog: inference.catalog, calls: { inference, clock, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode }, share: (accountId, id) => arenaReceipts.setShared(accountId, id, true), publicUrl: config.publicUrl, processes, stepFault: opts.stepFault, log: { warn: (o, m) => app.log.warn(o, m) } }); // arena
  const judge = new JudgeService({ db, clock, signer: signerSvc, sealKey: seal, anchors, calls: { inference, clock, publicUrl: config.publicUrl, guardrailsMode: config.guardrails.mode }, publicUrl: config.publicUrl }); // quality
  explorer.register('verdicts', judge.explorerSource()); // explorer
  const attestations = new AttestationsService({ db, clock, signer: signerSvc, metering, identity, anchors, events: webhooks, checker: new Checker({ clock, chains: config.chains, config: config.assets, self }), config: config.assets, publicUrl: config.publicUrl }); // attestations
  explorer.register('attestations', attestations.explorerSource()); // attestations
  const nav = new NavService({ db, clock, signer: signerSvc, metering, anchors, chains: new ChainRegistry(config.chains), sealKey: seal, config: config.assets, self, publicUrl: config.publicUrl }); // nav
  explorer.register('nav', nav.explorerSource()); // nav
  const benchmarks = new BenchmarksService({ db, clock, signer: signerSvc, metering, sealKey: seal, config: config.assets, publicUrl: config.publicUrl }); // benchmarks
  const batches = createBatches(config.batches, { db, clock, sealKey: seal, processes, keys, inference, publicUrl: config.publicUrl, holdTtlSeconds: config.billing.holdTtlSeconds, log: { error: (o, m) => app.log.error(o, m) } }); // files and batches
  const media = createMedia({ config: config.media, billing: config.billing, db, clock, metering, signer: signerSvc, sealKey: seal, inference, publicUrl: config.publicUrl, observeBalance: alerts.observe }); // media
  const subscriptions = new SubscriptionService({ db, clock, metering, events: webhooks, plans: config.plans, billing: config.billing, publicUrl: config.publicUrl, observeBalance: alerts.observe });

  const app = await buildApp({
    config,
    clock,
    metrics,
    identity,
    keys,
    denylist,
    health,
    signer: signerSvc,
    metering,
    notary,
    cursors,
    database,
    registry,
    sandboxes,
    inference, // inference
    webhooks,
    alerts,
    subscriptions,
    batches, // files and batches
    media, // media (images, videos, assistant)
    orgs,
    sources, // source sets
    passkeys, // passkeys
    mandates, // mandates and ghost sessions
    oauth, // oauth
    anchors, // public anchors
    calls, // sealed calls
    vault, // vault
    explorer, // explorer
    passports, // passports and KYA credentials
    services, // marketplace
    post, // agent post
    relays, // relays
    mcp, // mcp
    memory, // memory
    engine, // engine builds
    replay, // replay capsules
    autopilot, // autopilot
    arena, // arena
    state, // state
    attestations, // attestations
    nav, // nav
    benchmarks, // benchmarks
    agents, // agents
    legacy, // legacy plans
    darkpool, // dark pool
    support, // holder support claims
    guardrails: { guardrails, policies }, // guardrails, policies
    quality: { evals, judge }, // quality
    logger: opts.logger,
    adminMetrics: {
      snapshot: async () => {
        const a = await identity.accountCount();
        return {
          generated_at: clock.now().toISOString(),
          billing_enforced: config.billing.enforced,
          accounts: a.accounts,
          suspended_accounts: a.suspended,
          ...(await usageReport.platformSnapshot()),
          fleet: await registry.summary(), // console: the admin page's fleet summary
        };
      },
    },
  });

  hub.log = app.log;
  for (const c of keyChanges) {
    if ('rotatedSigner' in c) app.log.warn(c.rotatedSigner, `receipt signer rotated from ${c.rotatedSigner.from} to ${c.rotatedSigner.to}; remove SVC_SIGNER_ROTATE_FROM and give every replica the new SVC_SIGNER_KEY`);
    if ('replacedSeal' in c) app.log.warn(c.replacedSeal, `seal key replaced (fingerprint ${c.replacedSeal.from} to ${c.replacedSeal.to}); content sealed under the old key cannot be opened`);
  }
  discovery.log = app.log;
  // The first listing, waited for a few seconds at most: an upstream that hangs does not hold the boot (it is listed once it answers).
  await Promise.race([discovered, new Promise((r) => setTimeout(r, DISCOVERY_BOOT_WAIT_MS).unref())]);
  if (opts.loopTimers ?? true) discovery.start();
  await memory.start((m) => app.log.info(m)); // memory: how vectors are searched here, logged once
  sandboxes.terminals.log = app.log; // sandbox terminals
  hub.sessionsHeld = (nodeId, held) => sandboxes.sessions.held(nodeId, held);
  await hub.start();
  const detachChannel = attachAgentChannel(app, hub, registry);

  const leader = new Leader(database.leaderLock, metrics, app.log, config.leaderRetrySeconds * 1000, opts.loopTimers ?? true);
  leader.add({ name: 'health_sample', everyMs: config.healthSampleSeconds * 1000, run: () => health.recordSample() });
  leader.add({ name: 'expire_holds', everyMs: 15_000, run: async () => void (await metering.expireHolds()) });
  // Settles answered by a process that is gone (killed, scaled away) are stored by the leader.
  leader.add({ name: 'sweep_pending_settles', everyMs: (config.billing.pendingSweepSeconds ?? 5) * 1000, run: async () => void (await metering.sweepPending((ids) => database.processesAlive(ids))) });
  leader.add({ name: 'purge_idempotency_keys', everyMs: 3600_000, run: async () => void (await idempotency.purgeExpired()) });
  leader.add({ name: 'stop_idle_sandbox_sessions', everyMs: 30_000, run: async () => void (await sandboxes.sessions.reapIdle()) });
  leader.add({ name: 'subscription_renewals', everyMs: 60_000, run: async () => void (await subscriptions.renewDue()) });
  leader.add({ name: 'webhook_deliveries', everyMs: 2_000, run: async () => void (await webhookSender.deliverDue()) });
  leader.add({ name: 'batches', everyMs: 1_000, run: () => batches.runner.tick() }); // files and batches
  leader.add({
    name: 'purge_expired_files',
    everyMs: SWEEP_EVERY_MS,
    run: async () => {
      // Both, whichever fails: a failed purge must not keep the sweep from running, nor the other way round.
      const [purge, sweep] = await Promise.allSettled([batches.files.purgeExpired(), batches.files.sweepUploads()]);
      for (const r of [purge, sweep]) if (r.status === 'rejected') throw r.reason;
    },
  }); // files and batches
  leader.add({ name: 'video_jobs', everyMs: config.media.video.pollSeconds * 1000, run: () => media.loop((err, id) => app.log.warn({ err, job: id }, 'video job poll failed')) }); // media
  leader.add({ name: 'anchors', everyMs: config.anchors.everyMs, run: async () => void (await anchors.gather(), await anchors.advance()) }); // public anchors
  leader.add({ name: 'prune_webhook_history', everyMs: 3600_000, run: async () => void (await webhookSender.prune()) });
  leader.add({ name: 'purge_oauth', everyMs: 3600_000, run: async () => void (await oauth.service.purgeExpired()) }); // oauth
  leader.add({ name: 'purge_expired_ghosts', everyMs: 60_000, run: async () => void (await mandates.ghosts.purgeExpired()) }); // mandates: ghost sessions
  leader.add({ name: 'eval_monitors', everyMs: 60_000, run: () => evals.monitors.runDue() }); // quality
  leader.add({ name: 'arena', everyMs: 60_000, run: () => arena.runDue() }); // arena: declared suites on their cadence
  leader.add({ name: 'purge_idle_mcp_sessions', everyMs: 300_000, run: async () => void (await mcp.sessions.purgeIdle()) }); // mcp
  leader.add({ name: 'benchmark_retention', everyMs: 60_000, run: async () => void (await benchmarks.destroyDue()) }); // benchmarks: sealed holdings destroyed at their retention
  leader.add({ name: 'purge_siwe_nonces', everyMs: 3600_000, run: async () => void (await identity.purgeNonces()) }); // sign-in nonces
  leader.add({ name: 'agents', everyMs: 5_000, run: () => agents.tick() }); // agents: schedules, queued hook and mailbox runs
  leader.add({ name: 'relay_expiry', everyMs: 60_000, run: async () => void (await relays.sweep()) }); // relays: expired ciphertext destroyed, stale grants dropped
  leader.add({ name: 'legacy_plans', everyMs: config.legacy.everyMs, run: async () => void (await legacy.lifecycle.tick()) }); // legacy plans: warning, release
  leader.add({ name: 'purge_support_nonces', everyMs: 3600_000, run: async () => void (await support.purgeNonces()) }); // holder support claims
  if (passkeys) leader.add({ name: 'purge_passkey_challenges', everyMs: 3600_000, run: async () => void (await passkeys.purgeChallenges()) }); // passkeys
  await leader.start();

  let closed = false;
  return {
    app,
    config,
    database,
    leader,
    services: { identity, keys, denylist, health, metering, signer: signerSvc, webhooks, webhookSender, alerts, subscriptions, inference, terminals: sandboxes.terminals },
    fleet: { registry, hub },
    anchors,
    memory, // memory
    agents, // agents
    legacy, // legacy plans
    darkpool, // dark pool
    signerKey: signer,
    sealKey: seal,
    async listen() {
      const url = await app.listen({ port: config.port, host: config.host });
      self.listening = app.addresses().flatMap((a) => (typeof a === 'string' ? [] : [{ address: a.address, port: a.port }])); // outbound connections never reach these
      // The scheduler's view loads behind the first answers, so the first dispatches after a boot need not wait for it,
      // and is refreshed every 10 s from then on.
      registry.view.start((e: unknown) => app.log.warn({ err: e }, 'could not load the scheduler view at boot; the first dispatch loads it'));
      return url;
    },
    async close() {
      if (closed) return;
      closed = true;
      await batches.runner.stop(); // files and batches: lines in flight end before the database closes
      await agents.runner.stop(); // agents: runs under way end before the database closes
      await leader.stop();
      discovery.stop(); // inference
      registry.view.stop();
      await detachChannel(); // agents see their connection drop and dial again (another process, or this one restarted)
      await hub.close();
      await app.close();
      await denylist.stop();
      await keys.stop();
      await orgSessionEnds.stop();
      await mcp.servers.stop(); // mcp
      await unlistenLeases();
      await metering.close();
      await signerSvc.close();
      await alerts.idle();
      await database.close();
    },
  };
}
