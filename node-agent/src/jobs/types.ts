export interface JobContext {
  jobId: string;
  signal: AbortSignal;
  /**
   * Streams a chunk of output back to the control plane. A promise when outputs are waiting to go (the
   * control plane is slow to take them, for a slow caller, say): a handler that can wait awaits it.
   */
  emit(stream: 'stdout' | 'stderr' | 'data', data: string): void | Promise<void>;
  /**
   * Takes the job's input (InputMessage: a terminal's keystrokes), in seq order; what came before the handler
   * listened is handed over first. Absent where a job gets no input.
   */
  onInput?(listener: (seq: number, input: unknown) => void): void;
}

export interface JobOutcome {
  result: unknown;
  workUnits?: number;
}

export type JobHandler = (payload: unknown, ctx: JobContext) => Promise<JobOutcome>;
