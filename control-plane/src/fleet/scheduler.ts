import { HEARTBEAT_SECONDS, OFFLINE_AFTER_MISSED } from '@svc/shared';

/**
 * Picks a node for a job. Pure: the inputs are a snapshot of the registry, so it is unit-tested alone.
 *
 * Eligible: approved, not disabled, not draining, a heartbeat within 3 intervals (180 s), the job's node
 * kind (when it needs one) among the node's kinds, and for a model job the model among its declared models, and not excluded.
 * Score = speed_factor × r² × 1/(1 + running_jobs) × 1/(1 + latency_ms/1000), where r is the smoothed
 * reliability (succeeded + 1) / (succeeded + failed + 2): a Laplace prior, so a new node scores 0.5, not 0 or 1.
 * The smoothing lives only here; the registry publishes the plain share succeeded / (succeeded + failed).
 * Caller cancels count neither way (registry.ts, JobOutcome).
 * The highest score wins; ties go to the lower id so the choice is deterministic.
 */
export interface NodeSnapshot {
  id: string;
  kinds: string[];
  models: string[];
  speedFactor: number;
  approved: boolean;
  disabled: boolean;
  draining: boolean;
  lastHeartbeatAt: Date | null;
  runningJobs: number;
  succeeded: number;
  failed: number;
  latencyMs: number | null;
}

export interface JobNeed {
  /** The node kind the job needs; undefined: any node. */
  kind?: string | undefined;
  model?: string | undefined;
  exclude?: readonly string[];
  /** Work that belongs to a node already (a live session) may go to it while it drains. */
  allowDraining?: boolean;
}

export const OFFLINE_AFTER_MS = HEARTBEAT_SECONDS * OFFLINE_AFTER_MISSED * 1000;

export function isOnline(n: Pick<NodeSnapshot, 'lastHeartbeatAt'>, now: Date): boolean {
  return n.lastHeartbeatAt !== null && now.getTime() - n.lastHeartbeatAt.getTime() <= OFFLINE_AFTER_MS;
}

/** The scheduler's reliability: smoothed with a prior of one success and one failure. Not the published figure. */
export function smoothedReliability(n: Pick<NodeSnapshot, 'succeeded' | 'failed'>): number {
  return (n.succeeded + 1) / (n.succeeded + n.failed + 2);
}

export function isEligible(n: NodeSnapshot, need: JobNeed, now: Date): boolean {
  return (
    n.approved &&
    !n.disabled &&
    (!n.draining || need.allowDraining === true) &&
    isOnline(n, now) &&
    (need.kind === undefined || n.kinds.includes(need.kind)) &&
    (need.model === undefined || n.models.includes(need.model)) &&
    !(need.exclude ?? []).includes(n.id)
  );
}

export function score(n: NodeSnapshot): number {
  const r = smoothedReliability(n);
  return (n.speedFactor * r * r) / (1 + n.runningJobs) / (1 + (n.latencyMs ?? 0) / 1000);
}

/**
 * pickNode over nodes already in its order (score high to low, ties to the lower id, as NodeIndex.ranked gives
 * them): the first eligible one, the same node pickNode would choose, without scoring the rest.
 */
export function pickRanked<N extends NodeSnapshot>(ranked: Iterable<N>, need: JobNeed, now: Date): N | null {
  for (const n of ranked) if (isEligible(n, need, now)) return n;
  return null;
}

export function pickNode<N extends NodeSnapshot>(nodes: Iterable<N>, need: JobNeed, now: Date): N | null {
  let best: N | null = null;
  let bestScore = -Infinity;
  for (const n of nodes) {
    if (!isEligible(n, need, now)) continue;
    const s = score(n);
    if (s > bestScore || (s === bestScore && best !== null && n.id < best.id)) {
      best = n;
      bestScore = s;
    }
  }
  return best;
}
