import type { JobOutput } from '@svc/shared';
import type { CallerSignal } from '../http/caller-signal.ts';

/** What a caller of AgentHub.dispatch asks for. */
export interface JobSpec {
  /** The job kind the agent runs, e.g. `sandbox.run`, `diag.echo`. */
  kind: string;
  /** Which kind of node may run it; omitted: any node (diagnostics). */
  nodeKind?: 'sandbox' | 'inference' | undefined;
  payload: unknown;
  timeoutMs: number;
  accountId?: string | undefined;
  model?: string | undefined;
  /** Dispatch to this node only (a session that lives on one node, say). */
  nodeId?: string | undefined;
  /** May the job run again elsewhere if its node drops before it produced output? */
  retryable?: boolean;
  onOutput?: (o: JobOutput) => void;
  /** The caller went away: the job is canceled. */
  signal?: CallerSignal | undefined;
  /** The job's row is deleted once it ended: a caller that persists nothing (the keyless assistant). */
  unrecorded?: boolean;
}

/** A job that finished on its node, as dispatch resolves it. */
export interface JobResult {
  jobId: string;
  nodeId: string;
  result: unknown;
  durationMs: number;
  workUnits: number | undefined;
}
