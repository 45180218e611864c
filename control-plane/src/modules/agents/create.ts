import { Sealer } from '@svc/shared';
import type { AgentsDeps } from './deps.ts';
import { AgentHooks } from './hooks.ts';
import { Mailboxes } from './mailbox.ts';
import { AgentRunner } from './runner.ts';
import { AgentScheduler } from './scheduler.ts';
import { AgentsService } from './service.ts';
import { receiptedRunCount } from './store-runs.ts';

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
