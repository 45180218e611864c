import { describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { ManualClock } from '@svc/shared';
import { PublicListCache } from './public-list.ts';

describe('the kept public node list', () => {
  it('answers one build until it is a second old by the clock or invalidated, with the head entries first, and as gzip', async () => {
    const c = new ManualClock(new Date('2026-11-22T12:00:00Z'));
    let builds = 0;
    const cache = new PublicListCache(c, async () => JSON.stringify([{ id: `n${++builds}` }]), 1000);
    expect(await cache.json([{ id: 'gateway' }])).toBe('[{"id":"gateway"},{"id":"n1"}]');
    c.advance(999);
    expect(JSON.parse(gunzipSync(await cache.gzip([{ id: 'gateway' }])).toString())).toEqual([{ id: 'gateway' }, { id: 'n1' }]);
    c.advance(1);
    expect(await cache.json()).toBe('[{"id":"n2"}]');
    cache.invalidate();
    expect(await cache.json([{ id: 'gateway' }])).toBe('[{"id":"gateway"},{"id":"n3"}]');
    expect(builds).toBe(3);
  });
});
