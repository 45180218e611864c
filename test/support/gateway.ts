import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { ManualClock } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { loadConfig } from '../../control-plane/src/config.ts';
import { createGateway, type Gateway } from '../../control-plane/src/gateway.ts';
import type { StepFault } from '../../control-plane/src/jobs/faults.ts';
import { freshDatabase } from './database.ts';
import { seedEmbeddedDatabase } from './database-templates.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';
export const METRICS_TOKEN = 'test-metrics-token-0123456789';

/** Billing enforced, with the treasury and token that a 402's payment terms name. */
export const ENFORCED_BILLING = {
  SVC_BILLING_ENFORCED: 'true',
  SVC_TREASURY_ADDRESS: '0x1111111111111111111111111111111111111111',
  SVC_USDT_CONTRACT: '0x2222222222222222222222222222222222222222',
} as const;

/** A newly signed-in account granted `micro` micro-USD of credit, with an API key (`key`, the secret). */
export async function fundedKey(t: TestGateway, micro: number) {
  const s = await t.signIn();
  if (micro > 0) await t.gw.services.metering.credit(s.accountId, micro, 'grant', `test-${s.accountId}`);
  return { ...s, key: (await s.client.createKey()).key };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface TestGateway {
  gw: Gateway;
  url: string;
  clock: ManualClock;
  client: SvcClient;
  /** A new wallet signs in; returns a client carrying its session. */
  signIn(account?: PrivateKeyAccount): Promise<{ client: SvcClient; account: PrivateKeyAccount; accountId: string; token: string }>;
  /** Stops this process but keeps its database (to start another process on it). */
  stop(): Promise<void>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  env?: Record<string, string>;
  clock?: ManualClock;
  /** Reuse a database (and data dir) of an earlier gateway: a restart or a second process. */
  share?: { databaseUrl: string | undefined; dataDir: string };
  /** Keep the embedded database on disk so a later gateway can reopen it (restarts). */
  persistent?: boolean;
  /** Listen on this port (a restart on the same address, for agents to find again). */
  port?: number;
  reconnectGraceMs?: number;
  /** Logger options (a stream to capture the request log, say); default no logging. */
  logger?: object;
  /** Called between the steps of leader work; a throw stands for the process dying there. */
  stepFault?: StepFault;
}

/** A real control plane on a free loopback port over a fresh database, with an injected clock. */
export async function startTestGateway(opts: TestGatewayOptions = {}): Promise<TestGateway & { databaseUrl: string | undefined; dataDir: string }> {
  const db = opts.share ? { url: opts.share.databaseUrl, drop: async () => undefined } : await freshDatabase();
  const dataDir = opts.share?.dataDir ?? mkdtempSync(join(tmpdir(), 'svc-test-'));
  const port = opts.port ?? (await freePort());
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: db.url,
    SVC_ADMIN_TOKEN: ADMIN_TOKEN,
    SVC_METRICS_TOKEN: METRICS_TOKEN,
    SVC_LOG_LEVEL: 'silent',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true', // receivers run on loopback; test/webhooks.test.ts checks the default (off)
    // Passkeys mounted, like the admin and metrics groups; test/passkeys.test.ts checks them unset (404).
    SVC_PASSKEY_RP_ID: 'localhost',
    SVC_PASSKEY_ORIGIN: `http://localhost:${port}`,
    ...opts.env,
  });
  const clock = opts.clock ?? new ManualClock(Date.now());
  // A new embedded database starts as a copy of a migrated one, on disk in the data dir (see database-templates.ts).
  const seeded = !db.url && !opts.share && (await seedEmbeddedDatabase(dataDir));
  // Without a database URL each process would open its own embedded database; a shared one needs the data dir.
  const gw = await createGateway(config, {
    clock,
    loopTimers: false,
    logger: opts.logger ?? false,
    memoryDatabase: !db.url && !opts.share && !opts.persistent && !seeded,
    ...(opts.reconnectGraceMs !== undefined ? { reconnectGraceMs: opts.reconnectGraceMs } : {}),
    ...(opts.stepFault ? { stepFault: opts.stepFault } : {}),
  });
  const url = await gw.listen();
  const client = new SvcClient({ baseUrl: url });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await gw.close();
  };
  return {
    gw,
    url,
    clock,
    client,
    databaseUrl: db.url,
    dataDir,
    async signIn(account = privateKeyToAccount(generatePrivateKey())) {
      const { client: c, session } = await client.signIn(account, { issuedAt: clock.now() });
      return { client: c, account, accountId: session.account_id, token: session.token };
    },
    stop,
    async close() {
      await stop();
      await db.drop();
      if (!opts.share) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Two control-plane processes on one database with one clock, as in a deployment of several replicas.
 * Postgres only (the embedded database serves one process). `a` starts first and leads; `b` follows.
 */
export async function startGatewayPair(opts: Omit<TestGatewayOptions, 'share' | 'persistent'> = {}): Promise<{
  a: TestGateway & { databaseUrl: string | undefined; dataDir: string };
  b: TestGateway;
  close(): Promise<void>;
}> {
  const a = await startTestGateway(opts);
  const b = await startTestGateway({ ...opts, share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir }, clock: a.clock, port: undefined });
  return {
    a,
    b,
    async close() {
      await b.stop();
      await a.close();
    },
  };
}
