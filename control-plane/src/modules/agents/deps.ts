import type { Kysely } from 'kysely';
import { Sealer, type Clock } from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { DB } from '../../db/schema.ts';
import type { IdentityService } from '../identity/service.ts';
import type { KeysService } from '../keys/service.ts';
import type { SandboxExecutor } from '../sandboxes/executor.ts';
import { AgentHooks } from './hooks.ts';
import { Mailboxes } from './mailbox.ts';
import { AgentRunner } from './runner.ts';
import { AgentScheduler } from './scheduler.ts';
import { AgentsService } from './service.ts';
import { receiptedRunCount } from './store-runs.ts';

export interface AgentsDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealer: Sealer;
  keys: KeysService;
  identity: Pick<IdentityService, 'lockAccount'>;
  /** Runs execute as sandbox runs through the sandboxes module's executor (metered, receipted, recorded). */
  executor: SandboxExecutor;
  sandbox: SandboxConfig;
  publicUrl: URL;
  /** This process (claims of queued runs name it). */
  processId: string;
  log: { warn(o: object, msg: string): void; error(o: object, msg: string): void };
  /** Test seam: called between the steps of leader work (a throw stands for the process dying there). */
  stepFault?: StepFault | undefined;
}

export interface Agents {
  service: AgentsService;
  runner: AgentRunner;
  hooks: AgentHooks;
  mailboxes: Mailboxes;
  scheduler: AgentScheduler;
  /** The leader's loop: due schedules queued, interrupted runs closed, old hook signatures dropped, queued runs executed. */
  tick(): Promise<void>;
  explorerSource(): { counts(): Promise<Record<string, number>> };
}

/** Wires the hosted-agents module. */
export function createAgents(d: Omit<AgentsDeps, 'sealer'> & { sealKey: Uint8Array }): Agents {
  const deps: AgentsDeps = { ...d, sealer: new Sealer(d.sealKey) };
  const runner = new AgentRunner(deps);
  const scheduler = new AgentScheduler(deps, runner);
  const hooks = new AgentHooks(deps, runner);
  return {
    service: new AgentsService(deps),
    runner,
    hooks,
    mailboxes: new Mailboxes(deps, runner),
    scheduler,
    async tick() {
      await scheduler.runDue();
      await runner.closeInterrupted();
      await hooks.forgetOldSignatures();
      await runner.drain();
    },
    explorerSource: () => ({ counts: async () => ({ agent_runs: await receiptedRunCount(d.db) }) }),
  };
}
