/**
 * The clamp rule. A node declares `speed_factor` (1.0 = the reference node). Jobs that report work units
 * give an observed speed = (work_units / seconds) / REFERENCE_RATE[kind], smoothed as a moving average.
 * After MIN_SAMPLES jobs, whenever the smoothed observation is below the current factor by more than
 * TOLERANCE (the node claims to be faster than it is), the factor is clamped down to the observation and
 * clamp_count grows by one. A node that later proves faster may rise back, never above what it declared,
 * and rising is not counted.
 */
export const REFERENCE_RATE: Record<string, number> = {
  inference: 20, // output tokens per second at speed_factor 1
  sandbox: 1, // CPU-seconds of work per wall second
};
export const TOLERANCE = 1.5;
export const MIN_SAMPLES = 5;
const ALPHA = 0.3;

export function observeSpeed(
  row: { observed_speed: number | null; speed_factor: number; declared_speed_factor: number; succeeded: number },
  o: { kind: string; workUnits?: number | undefined; durationMs: number },
): { observed: number; speedFactor: number; clamped: boolean } | null {
  const ref = REFERENCE_RATE[o.kind];
  if (!ref || !o.workUnits || o.durationMs <= 0) return null;
  const sample = o.workUnits / (o.durationMs / 1000) / ref;
  const observed = row.observed_speed === null ? sample : row.observed_speed + ALPHA * (sample - row.observed_speed);
  if (row.succeeded + 1 < MIN_SAMPLES) return { observed, speedFactor: row.speed_factor, clamped: false };
  if (observed * TOLERANCE < row.speed_factor) return { observed, speedFactor: Number(observed.toFixed(3)), clamped: true };
  if (observed > row.speed_factor && row.speed_factor < row.declared_speed_factor) {
    return { observed, speedFactor: Math.min(row.declared_speed_factor, Number(observed.toFixed(3))), clamped: false };
  }
  return { observed, speedFactor: row.speed_factor, clamped: false };
}
