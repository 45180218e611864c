export interface JobContext {
  jobId: string;
  signal: AbortSignal;
  /** Streams a chunk of output back to the control plane. */
  emit(stream: 'stdout' | 'stderr' | 'data', data: string): void;
}

export interface JobOutcome {
  result: unknown;
  workUnits?: number;
}

export type JobHandler = (payload: unknown, ctx: JobContext) => Promise<JobOutcome>;
