import type { NodeSnapshot } from './scheduler.ts';

/** A node the scheduler would take for a sandbox job, last heard from at `heartbeatAt`; `over` changes any field. For the fleet's unit tests. */
export const nodeSnapshot = (heartbeatAt: Date, over: Partial<NodeSnapshot> = {}): NodeSnapshot => ({
  id: 'node_a',
  kinds: ['sandbox'],
  models: [],
  speedFactor: 1,
  approved: true,
  disabled: false,
  draining: false,
  lastHeartbeatAt: heartbeatAt,
  runningJobs: 0,
  succeeded: 0,
  failed: 0,
  latencyMs: null,
  ...over,
});
