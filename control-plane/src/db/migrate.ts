import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

/**
 * Forward-only migrations, named by timestamp; the list is static so bundling and tsx need no directory scan.
 * Each module is imported only when some migration is pending (a database's first boot, or an upgrade).
 */
const MIGRATIONS: Record<string, () => Promise<Migration>> = {
  '20261122_0001_identity': () => import('./migrations/20261122_0001_identity.ts'),
  '20261122_0002_platform': () => import('./migrations/20261122_0002_platform.ts'),
  '20261122_0003_money': () => import('./migrations/20261122_0003_money.ts'),
  '20261122_0004_money_batches': () => import('./migrations/20261122_0004_money_batches.ts'),
  '20261122_0005_lean_money_path': () => import('./migrations/20261122_0005_lean_money_path.ts'),
  '20261122_0006_run_chain_lock': () => import('./migrations/20261122_0006_run_chain_lock.ts'),
  '20261122_0007_set_based_settle': () => import('./migrations/20261122_0007_set_based_settle.ts'),
  '20261122_0008_set_based_hold': () => import('./migrations/20261122_0008_set_based_hold.ts'),
  '20261122_0009_credit_once': () => import('./migrations/20261122_0009_credit_once.ts'),
  '20261122_0010_drop_item_hold': () => import('./migrations/20261122_0010_drop_item_hold.ts'),
  '20261122_0011_fewer_money_statements': () => import('./migrations/20261122_0011_fewer_money_statements.ts'),
  '20261122_0100_billing_deposits': () => import('./migrations/20261122_0100_billing_deposits.ts'),
  '20261122_0101_pay_requests': () => import('./migrations/20261122_0101_pay_requests.ts'),
  '20261122_0200_fleet': () => import('./migrations/20261122_0200_fleet.ts'),
  '20261122_0300_sandboxes': () => import('./migrations/20261122_0300_sandboxes.ts'),
  '20261122_0400_webhooks': () => import('./migrations/20261122_0400_webhooks.ts'),
  '20261122_0401_balance_alerts': () => import('./migrations/20261122_0401_balance_alerts.ts'),
  '20261122_0402_subscriptions': () => import('./migrations/20261122_0402_subscriptions.ts'),
  '20261122_0500_files_batches': () => import('./migrations/20261122_0500_files_batches.ts'), // files and batches
  '20261122_0600_media': () => import('./migrations/20261122_0600_media.ts'),
  '20261122_0700_credit_leases': () => import('./migrations/20261122_0700_credit_leases.ts'),
  '20261124_0800_fleet_relay': () => import('./migrations/20261124_0800_fleet_relay.ts'),
  '20261124_0900_job_origin': () => import('./migrations/20261124_0900_job_origin.ts'),
  '20261124_1000_channel_epoch': () => import('./migrations/20261124_1000_channel_epoch.ts'),
  '20261125_1100_content_chunks': () => import('./migrations/20261125_1100_content_chunks.ts'),
  '20261125_1200_file_uploads': () => import('./migrations/20261125_1200_file_uploads.ts'),
  '20261126_1300_idempotency_owner': () => import('./migrations/20261126_1300_idempotency_owner.ts'),
  '20261127_1400_orgs': () => import('./migrations/20261127_1400_orgs.ts'),
  '20261127_1700_escrow': () => import('./migrations/20261127_1700_escrow.ts'), // escrow claims
  '20261127_1800_sources': () => import('./migrations/20261127_1800_sources.ts'), // source sets
  '20261127_1600_oauth': () => import('./migrations/20261127_1600_oauth.ts'),
  '20261127_1500_passkeys': () => import('./migrations/20261127_1500_passkeys.ts'),
  '20261127_1900_anchors': () => import('./migrations/20261127_1900_anchors.ts'),
  '20261127_2000_calls': () => import('./migrations/20261127_2000_calls.ts'), // sealed calls
  '20261127_3000_vault': () => import('./migrations/20261127_3000_vault.ts'), // vault
  '20261127_2100_passports': () => import('./migrations/20261127_2100_passports.ts'), // passports
  '20261127_2200_mandates': () => import('./migrations/20261127_2200_mandates.ts'), // mandates
  '20261127_2300_guardrails': () => import('./migrations/20261127_2300_guardrails.ts'), // guardrails, policies
  '20261127_2600_quality': () => import('./migrations/20261127_2600_quality.ts'), // quality
  '20261127_2400_mcp': () => import('./migrations/20261127_2400_mcp.ts'), // mcp
  '20261127_2800_memory': () => import('./migrations/20261127_2800_memory.ts'), // memory
  '20261127_2900_legacy': () => import('./migrations/20261127_2900_legacy.ts'), // legacy plans
  '20261127_3300_darkpool': () => import('./migrations/20261127_3300_darkpool.ts'), // dark pool
  '20261127_3700_support': () => import('./migrations/20261127_3700_support.ts'), // holder support claims
  '20261127_2700_state': () => import('./migrations/20261127_2700_state.ts'), // state
  '20261127_3100_attestations': () => import('./migrations/20261127_3100_attestations.ts'), // attestations
  '20261127_3400_nav': () => import('./migrations/20261127_3400_nav.ts'), // nav
  '20261127_3900_benchmarks': () => import('./migrations/20261127_3900_benchmarks.ts'), // benchmarks
  '20261127_3200_engine': () => import('./migrations/20261127_3200_engine.ts'), // engine builds
  '20261127_3500_replay': () => import('./migrations/20261127_3500_replay.ts'), // replay capsules
  '20261127_3800_autopilot': () => import('./migrations/20261127_3800_autopilot.ts'), // autopilot
  '20261127_4000_arena': () => import('./migrations/20261127_4000_arena.ts'), // arena
  '20261127_2800_agents': () => import('./migrations/20261127_2800_agents.ts'), // agents
  '20261127_3600_services': () => import('./migrations/20261127_3600_services.ts'), // marketplace
  '20261127_4100_post': () => import('./migrations/20261127_4100_post.ts'), // agent post
  '20261127_4200_relays': () => import('./migrations/20261127_4200_relays.ts'), // relays
  '20261128_0100_gateway_keys': () => import('./migrations/20261128_0100_gateway_keys.ts'), // the keys every replica shares
  '20261128_0200_monitor_claims': () => import('./migrations/20261128_0200_monitor_claims.ts'), // quality: drift monitor runs claimed
  '20261128_0300_arena_live': () => import('./migrations/20261128_0300_arena_live.ts'), // arena: runs under way
  '20261201_4300_run_span_from_receipts': () => import('./migrations/20261201_4300_run_span_from_receipts.ts'), // run spans from their receipts
  '20261202_4400_pending_settles': () => import('./migrations/20261202_4400_pending_settles.ts'), // settles answered before they are written, where every replica reaches them
  '20261202_4500_node_changes': () => import('./migrations/20261202_4500_node_changes.ts'), // when each node's row last changed, for the scheduler view's incremental read
  '20261204_4600_node_writers': () => import('./migrations/20261204_4600_node_writers.ts'), // which process last wrote each node's row: the view's incremental read skips its own
};

const provider: MigrationProvider = {
  getMigrations: async () => Object.fromEntries(await Promise.all(Object.entries(MIGRATIONS).map(async ([name, load]) => [name, await load()] as const))),
};

/** The names of the applied migrations, or null where the table does not exist yet (or cannot be read). */
async function appliedNames(db: Kysely<any>): Promise<Set<string> | null> {
  try {
    const r = await sql<{ name: string }>`select name from svc_migrations`.execute(db);
    return new Set(r.rows.map((row) => row.name));
  } catch {
    return null;
  }
}

export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  // One query when the database holds exactly this list (every boot but the first after an install or
  // upgrade); anything else (pending, unknown or no table) goes through the migrator, as it always did.
  const applied = await appliedNames(db);
  const names = Object.keys(MIGRATIONS);
  if (applied && applied.size === names.length && names.every((n) => applied.has(n))) return;
  // Modules add migrations independently, so a newer module's earlier timestamp must still apply.
  const migrator = new Migrator({ db, provider, migrationTableName: 'svc_migrations', migrationLockTableName: 'svc_migrations_lock', allowUnorderedMigrations: true });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
