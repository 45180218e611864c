import { defineConfig } from 'vitest/config';

/** Every test: unit tests beside the code, end-to-end tests in test/. `npm test` runs them all on the embedded database. */
const ALL_TESTS = ['shared/src/**/*.test.ts', 'control-plane/src/**/*.test.ts', 'node-agent/src/**/*.test.ts', 'cli/src/**/*.test.ts', 'test/**/*.test.ts'];

/**
 * The tests whose behaviour depends on the storage backend; `npm run test:pg` runs only these, on the
 * Postgres server. A test file belongs here when what it checks differs between the embedded database
 * (one process, one connection, transactions one at a time) and a server: several control-plane processes,
 * LISTEN/NOTIFY, leader election, concurrent transactions on money, leases, migrations, storage of large
 * content, recovery after a crash or restart. To add a file, add one line. test/backend-tests.test.ts fails
 * when a file that starts a second process or branches on the backend is missing here.
 */
export const BACKEND_TESTS = [
  'test/money*.test.ts', // holds and settles under concurrency, batches, credit leases, a process killed mid-request
  'test/settle-behind.test.ts', // write-behind settles: pending rows, crash, the leader's sweep
  'test/settles-replicas.test.ts', // two processes on one Postgres: read-your-writes across them, one killed (its data dir gone or kept) and its answered settles stored once
  'test/billing-deposits.test.ts', // a transfer credited once under concurrent submissions
  'test/proofs.test.ts', // run chains built by concurrent requests
  'test/proofs-span.test.ts', // a run's span set by the stored settle function, and the migration that sets recorded runs from their receipts
  'test/fleet-relay*.test.ts', // dispatch across processes over NOTIFY (Postgres only)
  'test/fleet-node-keys.test.ts', // node keys kept in memory by two processes, a suspension on one reaching the other (NOTIFY)
  'test/usage.test.ts', // usage stream fanned out across processes
  'test/platform.test.ts', // leader election (advisory lock), restart on the same data
  'test/alerts.test.ts', // two processes observing one balance crossing
  'test/subscriptions.test.ts', // renewal once, on the leader of two processes
  'test/webhooks-outbox.test.ts', // one delivery in flight across two processes
  'test/webhooks.test.ts', // the outbox survives restarts
  'test/batches.test.ts', // batch lines resumed after a restart, none charged twice
  'test/media-videos-edges.test.ts', // a crash after the charge (a plpgsql trigger)
  'test/large-content.test.ts', // content stored in sealed chunks larger than a message
  'test/idempotency-crash.test.ts', // a key whose process died mid-run, taken over from another process
  'test/orgs.test.ts', // organizations seen from two processes
  'test/oauth.test.ts', // racing uses of one refresh token within the grace window rotate once (row locks)
  'test/passkeys.test.ts', // two registrations racing at the per-account limit (the account lock)
  'test/anchors.test.ts', // two processes gathering queued hashes into batches at once (skip locked)
  'test/account-lock.test.ts', // the account lock beside another transaction: lockers wait, referencing inserts do not
  'test/mandates.test.ts', // concurrent creations at the per-account limit (the account lock)
  'test/ghost.test.ts', // concurrent starts at the per-account limit (the account lock)
  'test/sealed-calls.test.ts', // two commits racing at the per-account cap (the account lock)
  'test/vault-transfers.test.ts', // concurrent transfers from one position racing for the asset's row lock (exactly the allowed ones pass)
  'test/passports.test.ts', // racing claims of one handle (one row wins on the unique index) and racing KYA mints at one handle (row lock)
  'test/post.test.ts', // concurrent sends racing for one inbox's last places: postage moved exactly once per message (account locks)
  'test/mcp.test.ts', // MCP sessions served by any process, registrations cached per process and dropped on NOTIFY
  'test/guardrails.test.ts', // a revoked policy or deleted rule set reaching another process's cached keys (NOTIFY)
  'test/memory.test.ts', // vector search by an HNSW index (pgvector, embedded) or an exact scan in SQL (a server without pgvector); concurrent creations at the per-account cap
  'test/agents-queue.test.ts', // queued agent runs claimed once across two processes (skip locked), picked up after a restart
  'test/agents-hooks.test.ts', // bursts of hook calls against max_runs_per_hour and the key's cap (a row lock on the agent, concurrent transactions)
  'test/state.test.ts', // two writers with one If-Match racing on a value's row lock (one wins), creations racing at the per-account key limit (the account lock)
  'test/legacy.test.ts', // several lifecycle ticks at once release a plan once (the plan's row lock)
  'test/darkpool.test.ts', // two questions racing for one counterparty make one match (both intents' row locks)
  'test/asset-proofs-races.test.ts', // concurrent attestation and NAV refreshes numbering versions (account lock, row lock), submissions bringing a cohort to k making one release (advisory lock)
  'test/replica-keys.test.ts', // replicas on one Postgres with other keys refused at boot, processes racing the first boot agreeing on one record
  'test/leader-steps.test.ts', // a leader killed between two steps of a loop (a fault injected there), the next process leading: nothing lost, nothing run twice
  'test/production-tree.test.ts', // the image's production tree (built JavaScript, production dependencies) booted on the server it is deployed against
];

const backendOnly = process.env.SVC_TEST_SET === 'backend';

export default defineConfig({
  test: {
    include: backendOnly ? BACKEND_TESTS : ALL_TESTS,
    // Tests that need the machine's Docker engine, sandbox images or tools (test/support/needs.ts) fail under
    // CI=true when it lacks them; elsewhere they skip, and this prints one line at the end naming them.
    globalSetup: ['test/support/build-setup.ts', 'test/support/needs-report.ts'],
    // Limits that catch a hang, not a slow machine: the slowest tests take 10-15 s on an idle 2-core machine
    // and more than twice that on a loaded one.
    testTimeout: 90_000,
    hookTimeout: 120_000,
    // expect.poll waits for something another process does (a container stopped, a page redrawn): a bound that
    // catches it never happening, not the 1 s default a loaded machine outruns.
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    // Two test files at a time: most of a test's time is spent waiting on other processes (agents, Docker,
    // child gateways, loopback servers), so two keep a 2-core machine busy. VITEST_MAX_WORKERS overrides it.
    maxWorkers: 2,
  },
});
