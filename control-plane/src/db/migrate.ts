import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import * as identity from './migrations/20261122_0001_identity.ts';
import * as platform from './migrations/20261122_0002_platform.ts';
import * as money from './migrations/20261122_0003_money.ts';
import * as moneyBatches from './migrations/20261122_0004_money_batches.ts';
import * as leanMoney from './migrations/20261122_0005_lean_money_path.ts';
import * as runLock from './migrations/20261122_0006_run_chain_lock.ts';
import * as setSettle from './migrations/20261122_0007_set_based_settle.ts';
import * as setHold from './migrations/20261122_0008_set_based_hold.ts';
import * as creditOnce from './migrations/20261122_0009_credit_once.ts';
import * as dropItemHold from './migrations/20261122_0010_drop_item_hold.ts';
import * as fewerMoneyStatements from './migrations/20261122_0011_fewer_money_statements.ts';
import * as billingDeposits from './migrations/20261122_0100_billing_deposits.ts';
import * as payRequests from './migrations/20261122_0101_pay_requests.ts';
import * as fleet from './migrations/20261122_0200_fleet.ts';
import * as sandboxes from './migrations/20261122_0300_sandboxes.ts';
import * as webhooks from './migrations/20261122_0400_webhooks.ts';
import * as balanceAlerts from './migrations/20261122_0401_balance_alerts.ts';
import * as subscriptions from './migrations/20261122_0402_subscriptions.ts';
import * as filesBatches from './migrations/20261122_0500_files_batches.ts'; // files and batches
import * as media from './migrations/20261122_0600_media.ts'; // media (video jobs)
import * as creditLeases from './migrations/20261122_0700_credit_leases.ts';
import * as fleetRelay from './migrations/20261124_0800_fleet_relay.ts';
import * as jobOrigin from './migrations/20261124_0900_job_origin.ts';
import * as channelEpoch from './migrations/20261124_1000_channel_epoch.ts';
import * as contentChunks from './migrations/20261125_1100_content_chunks.ts';
import * as fileUploads from './migrations/20261125_1200_file_uploads.ts';
import * as orgs from './migrations/20261127_1400_orgs.ts';
import * as escrow from './migrations/20261127_1700_escrow.ts'; // escrow claims
import * as sources from './migrations/20261127_1800_sources.ts'; // source sets
import * as passkeys from './migrations/20261127_1500_passkeys.ts';
import * as idempotencyOwner from './migrations/20261126_1300_idempotency_owner.ts';
import * as oauth from './migrations/20261127_1600_oauth.ts';
import * as anchors from './migrations/20261127_1900_anchors.ts';
import * as calls from './migrations/20261127_2000_calls.ts'; // sealed calls
import * as vault from './migrations/20261127_3000_vault.ts'; // vault
import * as passports from './migrations/20261127_2100_passports.ts'; // passports
import * as mandates from './migrations/20261127_2200_mandates.ts'; // mandates
import * as guardrails from './migrations/20261127_2300_guardrails.ts'; // guardrails, policies
import * as quality from './migrations/20261127_2600_quality.ts'; // quality
import * as mcp from './migrations/20261127_2400_mcp.ts'; // mcp
import * as memory from './migrations/20261127_2800_memory.ts'; // memory
import * as legacy from './migrations/20261127_2900_legacy.ts'; // legacy plans
import * as darkpool from './migrations/20261127_3300_darkpool.ts'; // dark pool
import * as support from './migrations/20261127_3700_support.ts'; // holder support claims
import * as state from './migrations/20261127_2700_state.ts'; // state
import * as attestations from './migrations/20261127_3100_attestations.ts'; // attestations
import * as nav from './migrations/20261127_3400_nav.ts'; // nav
import * as benchmarks from './migrations/20261127_3900_benchmarks.ts'; // benchmarks
import * as engine from './migrations/20261127_3200_engine.ts'; // engine builds
import * as replay from './migrations/20261127_3500_replay.ts'; // replay capsules
import * as autopilot from './migrations/20261127_3800_autopilot.ts'; // autopilot
import * as arena from './migrations/20261127_4000_arena.ts'; // arena
import * as agents from './migrations/20261127_2800_agents.ts'; // agents
import * as services from './migrations/20261127_3600_services.ts'; // marketplace
import * as post from './migrations/20261127_4100_post.ts'; // agent post
import * as relays from './migrations/20261127_4200_relays.ts'; // relays
import * as gatewayKeys from './migrations/20261128_0100_gateway_keys.ts'; // the keys every replica shares
import * as monitorClaims from './migrations/20261128_0200_monitor_claims.ts'; // quality: drift monitor runs claimed
import * as arenaLive from './migrations/20261128_0300_arena_live.ts'; // arena: runs under way
import * as runSpan from './migrations/20261201_4300_run_span_from_receipts.ts';

/** Forward-only migrations, named by timestamp; the list is static so bundling and tsx need no directory scan. */
const MIGRATIONS: Record<string, Migration> = {
  '20261122_0001_identity': identity,
  '20261122_0002_platform': platform,
  '20261122_0003_money': money,
  '20261122_0004_money_batches': moneyBatches,
  '20261122_0005_lean_money_path': leanMoney,
  '20261122_0006_run_chain_lock': runLock,
  '20261122_0007_set_based_settle': setSettle,
  '20261122_0008_set_based_hold': setHold,
  '20261122_0009_credit_once': creditOnce,
  '20261122_0010_drop_item_hold': dropItemHold,
  '20261122_0011_fewer_money_statements': fewerMoneyStatements,
  '20261122_0100_billing_deposits': billingDeposits,
  '20261122_0101_pay_requests': payRequests,
  '20261122_0200_fleet': fleet,
  '20261122_0300_sandboxes': sandboxes,
  '20261122_0400_webhooks': webhooks,
  '20261122_0401_balance_alerts': balanceAlerts,
  '20261122_0402_subscriptions': subscriptions,
  '20261122_0500_files_batches': filesBatches, // files and batches
  '20261122_0600_media': media,
  '20261122_0700_credit_leases': creditLeases,
  '20261124_0800_fleet_relay': fleetRelay,
  '20261124_0900_job_origin': jobOrigin,
  '20261124_1000_channel_epoch': channelEpoch,
  '20261125_1100_content_chunks': contentChunks,
  '20261125_1200_file_uploads': fileUploads,
  '20261126_1300_idempotency_owner': idempotencyOwner,
  '20261127_1400_orgs': orgs,
  '20261127_1700_escrow': escrow, // escrow claims
  '20261127_1800_sources': sources, // source sets
  '20261127_1600_oauth': oauth,
  '20261127_1500_passkeys': passkeys,
  '20261127_1900_anchors': anchors,
  '20261127_2000_calls': calls, // sealed calls
  '20261127_3000_vault': vault, // vault
  '20261127_2100_passports': passports, // passports
  '20261127_2200_mandates': mandates, // mandates
  '20261127_2300_guardrails': guardrails, // guardrails, policies
  '20261127_2600_quality': quality, // quality
  '20261127_2400_mcp': mcp, // mcp
  '20261127_2800_memory': memory, // memory
  '20261127_2900_legacy': legacy, // legacy plans
  '20261127_3300_darkpool': darkpool, // dark pool
  '20261127_3700_support': support, // holder support claims
  '20261127_2700_state': state, // state
  '20261127_3100_attestations': attestations, // attestations
  '20261127_3400_nav': nav, // nav
  '20261127_3900_benchmarks': benchmarks, // benchmarks
  '20261127_3200_engine': engine, // engine builds
  '20261127_3500_replay': replay, // replay capsules
  '20261127_3800_autopilot': autopilot, // autopilot
  '20261127_4000_arena': arena, // arena
  '20261127_2800_agents': agents, // agents
  '20261127_3600_services': services, // marketplace
  '20261127_4100_post': post, // agent post
  '20261127_4200_relays': relays, // relays
  '20261128_0100_gateway_keys': gatewayKeys, // the keys every replica shares
  '20261128_0200_monitor_claims': monitorClaims, // quality: drift monitor runs claimed
  '20261128_0300_arena_live': arenaLive, // arena: runs under way
  '20261201_4300_run_span_from_receipts': runSpan,
};

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  // Modules add migrations independently, so a newer module's earlier timestamp must still apply.
  const migrator = new Migrator({ db, provider, migrationTableName: 'svc_migrations', migrationLockTableName: 'svc_migrations_lock', allowUnorderedMigrations: true });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
