import type { JobOutput } from '@svc/shared';
import type { CallerSignal } from '../http/caller-signal.ts';

/** What a caller of AgentHub.dispatch asks for. */
export interface JobSpec {
  /** The job kind the agent runs, e.g. `sandbox.run`, `diag.echo`. */
  kind: string;
  /** Which kind of node may run it; omitted: any node (diagnostics). */
  nodeKind?: 'sandbox' | 'inference' | undefined;
  /** What the agent gets; a function of the node picked to send each node only its own part. */
  payload: unknown | ((nodeId: string) => unknown);
  /** The whole job's time limit (the agent's; the control plane's backstop 5 s later). */
  timeoutMs: number;
  /** Also a limit on the time without output, enforced by the agent: a stream's limit between two chunks. */
  idleTimeoutMs?: number;
  accountId?: string | undefined;
  model?: string | undefined;
  /** Dispatch to this node only (a session that lives on one node, say). */
  nodeId?: string | undefined;
  /** May the job run again elsewhere if its node drops before it produced output? */
  retryable?: boolean;
  /** Each output in order; a promise it returns holds the agent's next outputs back until it settles (a slow consumer). */
  onOutput?: (o: JobOutput) => unknown;
  /** The job went to its node (onto this process's channel, or to the process holding it): input may follow (AgentHub.input). */
  onSent?: (jobId: string, nodeId: string) => void;
  /** The caller went away: the job is canceled. */
  signal?: CallerSignal | undefined;
  /**
   * With `signal`: when the caller goes, the job is canceled on its node but still followed for this long, so that
   * dispatch resolves with what the node reports of the stopped job (a metered run is charged for what ran). The
   * job is then never dispatched again, and its end counts neither for nor against the node. Without it, or past
   * it, dispatch fails at once (`conflict`, "Job canceled").
   */
  cancelGraceMs?: number;
  /** The job's row is deleted once it ended: a caller that persists nothing (the keyless assistant). */
  unrecorded?: boolean;
  /**
   * For a job that finished and answers a failure in its result (an inference node's local server unreachable
   * or failing): the failure to record against the node, else null. The job still resolves with its result.
   */
  failedResult?: (result: unknown) => string | null;
}

/** The job message's idle limit, when the spec has one. */
export const idleLimit = (spec: JobSpec): { idle_timeout_ms?: number } => (spec.idleTimeoutMs ? { idle_timeout_ms: spec.idleTimeoutMs } : {});

/** A job that finished on its node, as dispatch resolves it. */
export interface JobResult {
  jobId: string;
  nodeId: string;
  result: unknown;
  durationMs: number;
  workUnits: number | undefined;
}
