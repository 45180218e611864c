export interface JobContext {
  jobId: string;
  signal: AbortSignal;
  /**
   * Streams a chunk of output back to the control plane. A promise when outputs are waiting to go (the
   * control plane is slow to take them, for a slow caller, say): a handler that can wait awaits it.
   */
  emit(stream: 'stdout' | 'stderr' | 'data', data: string): void | Promise<void>;
}

export interface JobOutcome {
  result: unknown;
  workUnits?: number;
}

export type JobHandler = (payload: unknown, ctx: JobContext) => Promise<JobOutcome>;
