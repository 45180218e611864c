import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { Idempotency } from '../../http/idempotency.ts';
import type { SandboxExecutor } from './executor.ts';
import type { RunRecords } from './records.ts';
import type { SandboxSessions } from './sessions.ts';
import type { SessionTerminals } from './session-terminals.ts';

export interface SandboxDeps {
  db: Kysely<DB>;
  clock: Clock;
  config: SandboxConfig;
  executor: SandboxExecutor;
  sessions: SandboxSessions;
  /** Interactive terminals into sessions, open on this process. */
  terminals: SessionTerminals;
  records: RunRecords;
  idempotency: Idempotency;
  publicUrl: URL;
}
