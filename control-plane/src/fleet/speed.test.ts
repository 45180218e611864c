import { describe, expect, it } from 'vitest';
import { MIN_SAMPLES, observeSpeed } from './speed.ts';

const row = (over = {}) => ({ observed_speed: null as number | null, speed_factor: 4, declared_speed_factor: 4, succeeded: 10, ...over });

describe('speed clamp rule', () => {
  it('ignores jobs without work units or of unknown kinds', () => {
    expect(observeSpeed(row(), { kind: 'inference', durationMs: 1000 })).toBeNull();
    expect(observeSpeed(row(), { kind: 'mystery', workUnits: 5, durationMs: 1000 })).toBeNull();
  });

  it('clamps a node that claims 4x but delivers 1x, and counts it', () => {
    const r = observeSpeed(row(), { kind: 'inference', workUnits: 20, durationMs: 1000 });
    expect(r).toEqual({ observed: 1, speedFactor: 1, clamped: true });
  });

  it('does not clamp within tolerance or before enough samples', () => {
    expect(observeSpeed(row(), { kind: 'inference', workUnits: 60, durationMs: 1000 })?.clamped).toBe(false); // 3x vs 4x
    expect(observeSpeed(row({ succeeded: MIN_SAMPLES - 2 }), { kind: 'inference', workUnits: 20, durationMs: 1000 })?.clamped).toBe(false);
  });

  it('lets a clamped node rise back up to, never above, its declaration', () => {
    const r = observeSpeed(row({ speed_factor: 1, observed_speed: 1 }), { kind: 'inference', workUnits: 400, durationMs: 1000 });
    expect(r?.clamped).toBe(false);
    expect(r!.speedFactor).toBeGreaterThan(1);
    expect(r!.speedFactor).toBeLessThanOrEqual(4);
  });
});
