import type { Kysely } from 'kysely';
import type { Clock, Sealer } from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { DB } from '../../db/schema.ts';
import type { IdentityService } from '../identity/service.ts';
import type { KeysService } from '../keys/service.ts';
import type { SandboxExecutor } from '../sandboxes/executor.ts';

/** What every part of the hosted-agents module is given (wired in create.ts). */
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
