import { describe, expect, it } from 'vitest';
import { Readiness } from './readiness.ts';

describe('Readiness', () => {
  it('is ready with no condition, unmet while one says why, ready again once it holds or is released', async () => {
    const r = new Readiness();
    expect(await r.unmet()).toBeNull();
    let connected = false;
    r.require('agent', () => (connected ? null : 'not connected'));
    r.require('stopping', async () => null);
    expect(await r.unmet()).toBe('not connected');
    connected = true;
    expect(await r.unmet()).toBeNull();
    r.require('agent', () => 'replaced');
    expect(await r.unmet()).toBe('replaced');
    r.release('agent');
    expect(await r.unmet()).toBeNull();
  });

  it('counts a check that throws as unmet, naming it', async () => {
    const r = new Readiness();
    r.require('local_agent', () => {
      throw new Error('boom');
    });
    expect(await r.unmet()).toBe('local_agent could not be checked');
  });
});
