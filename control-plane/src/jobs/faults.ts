/**
 * The points of leader work where a process could die between two of its steps. A test passes a function
 * that throws at one of them (`GatewayOptions.stepFault`) to stand for the process dying there; production
 * passes none.
 */
export type LeaderStep =
  /** A scheduled agent run taken (next_run_at moved), before its run is queued. */
  | 'agents.schedule_taken'
  /** A drift monitor's run claimed, before its suite runs. */
  | 'evals.monitor_claimed'
  /** A task of an arena run done and kept, before the next task. */
  | 'arena.task_done'
  /** A legacy plan warned or released, before its event is queued for anchoring. */
  | 'legacy.plan_moved';

export type StepFault = (step: LeaderStep, ref: string) => void | Promise<void>;
