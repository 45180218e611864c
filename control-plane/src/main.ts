import { ConfigError, loadConfig } from './config.ts';
import { createGateway } from './gateway.ts';
import { stallTrace } from './modules/platform/stall-trace.ts';
import { LOCAL_AGENT_READY, startLocalAgent, type LocalAgent } from './local-agent.ts';

/** Boots one control-plane process from the environment. */
async function main(): Promise<void> {
  let config;
  let gw;
  try {
    config = loadConfig(process.env);
    // Readable lines on a terminal (or SVC_LOG_FORMAT=pretty), JSON otherwise: the formatter is loaded only for a terminal.
    const pretty = config.logFormat === 'pretty' || (config.logFormat === 'auto' && process.stdout.isTTY === true);
    const logger = pretty ? { level: config.logLevel, stream: (await import('./http/pretty-log.ts')).prettyDestination(process.stdout, !config.noColor && process.stdout.isTTY === true) } : undefined;
    gw = await createGateway(config, { logger }); // refuses keys other than the ones the database records (a ConfigError)
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`svc: ${e.message}`);
      process.exit(78); // EX_CONFIG
    }
    throw e;
  }
  const readiness = gw.services.health.readiness;
  // Not ready until the local node agent (if one starts) is connected: the listener answers before it is.
  if (config.localAgent) readiness.require(LOCAL_AGENT_READY, () => 'the local node agent is starting');
  const url = await gw.listen();
  if (config.stallTraceSeconds > 0) {
    // What held up the main thread around the slowest requests, logged and restarted every period.
    stallTrace.start();
    setInterval(() => {
      gw.app.log.info({ stall_trace: stallTrace.report() }, 'main-thread stall trace');
      stallTrace.reset();
    }, config.stallTraceSeconds * 1000).unref();
  }
  gw.app.log.info(
    { url, storage: gw.database.kind, admin: Boolean(config.adminToken), metrics: Boolean(config.metricsToken) },
    `gateway listening on ${url} (storage: ${gw.database.kind === 'pglite' ? `embedded, ${config.dataDir}` : 'postgres'})`,
  );
  // One orderly stop, whatever signals arrive: Ctrl-C reaches the whole process group (this process and the
  // local agent) and `npm start` passes its own signal on, so a second signal only says that the stop goes on.
  let stopping = false;
  let agent: Promise<LocalAgent | null> = Promise.resolve(null);
  const stop = async (signal: string) => {
    if (stopping) return gw.app.log.info({ signal }, 'already shutting down');
    stopping = true;
    gw.app.log.info({ signal }, 'shutting down');
    readiness.require('stopping', () => 'the gateway is stopping');
    // The agent (once started, if it was starting) removes its sandbox containers and volumes while the
    // gateway closes; both end before the exit.
    const local = await agent.catch(() => null);
    for (const r of await Promise.allSettled([local?.stop(), gw.close()])) if (r.status === 'rejected') gw.app.log.error({ err: r.reason }, 'error while shutting down');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  if (config.localAgent) {
    agent = startLocalAgent(gw, url.replace('0.0.0.0', '127.0.0.1'));
    await agent;
  }
}

main().catch((e) => {
  console.error('svc: failed to start:', e instanceof Error ? e.message : e);
  process.exit(1);
});
