import { ConfigError, loadConfig } from './config.ts';
import { createGateway } from './gateway.ts';
import { startLocalAgent } from './local-agent.ts';

/** Boots one control-plane process from the environment. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`svc: ${e.message}`);
      process.exit(78); // EX_CONFIG
    }
    throw e;
  }
  const gw = await createGateway(config);
  const url = await gw.listen();
  gw.app.log.info(
    { url, storage: gw.database.kind, admin: Boolean(config.adminToken), metrics: Boolean(config.metricsToken) },
    `gateway listening on ${url} (storage: ${gw.database.kind === 'pglite' ? `embedded, ${config.dataDir}` : 'postgres'})`,
  );
  const stopAgent = config.localAgent ? await startLocalAgent(gw, url.replace('0.0.0.0', '127.0.0.1')) : null;
  const stop = async (signal: string) => {
    gw.app.log.info({ signal }, 'shutting down');
    stopAgent?.();
    await gw.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((e) => {
  console.error('svc: failed to start:', e instanceof Error ? e.message : e);
  process.exit(1);
});
