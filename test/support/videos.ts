import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { SvcClient } from '@svc/shared/client';
import { call } from './call.ts';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './gateway.ts';
import { startMediaUpstream, type MediaUpstream } from './media-upstream.ts';

/**
 * The video jobs tests' gateway: a real OpenAI Videos API server on loopback, billing enforced. The tests move
 * the upstream render along and drive the leader's loops with runAllOnce; time moves on the ManualClock.
 * Price 1,000 micro-USD per second, maximum 12 s, so every hold is 12,000 and a charge is checkable by hand.
 * `t`, `up`, `a` and `b` are set by the hooks useVideoGateway registers (live bindings for the test files).
 */
export const PRICE = 1_000;
export const HOLD = 12 * PRICE;
export const TTL = 3_600;
export const RENDER_LIMIT = 600;
export let up: MediaUpstream;
export let t: TestGateway;
export let a: Caller;
export let b: Caller;

export interface Caller {
  accountId: string;
  key: string;
  c: SvcClient;
}

export const env = () => ({
  ...ENFORCED_BILLING,
  SVC_MEDIA_TIMEOUT_SECONDS: '5',
  SVC_VIDEO_TTL_SECONDS: String(TTL),
  SVC_VIDEO_RENDER_TIMEOUT_SECONDS: String(RENDER_LIMIT),
  SVC_HOLD_TTL_SECONDS: '60', // request holds expire quickly; a render's hold must outlive its time limit
  SVC_VIDEO_PROVIDERS: JSON.stringify([
    { name: 'vids', base_url: up.url, api_key: 'sk-video-upstream', models: [{ id: 'test-video', price_micro_usd_per_second: PRICE, max_seconds: 12, seconds: [4, 8, 12], resolutions: ['1280x720', '720x1280'] }] },
  ]),
});

/** Registers the hooks that start the upstream and the gateway (and two funded callers) for a test file. */
export function useVideoGateway(): void {
  beforeAll(async () => {
    up = await startMediaUpstream();
    t = await startTestGateway({ env: env() });
    [a, b] = [await funded(1_000_000), await funded(1_000_000)];
  });
  afterAll(async () => {
    await t?.close();
    await up?.close();
  });
  beforeEach(() => up.reset());
}

export async function funded(micro: number): Promise<Caller> {
  const { accountId, key } = await fundedKey(t, micro);
  return { accountId, key, c: t.client.withCredential({ kind: 'key', token: key }) };
}
export const position = (id: string) => t.gw.services.metering.position(id);
/** An account's balance and holds, without what its leases set aside (a lease unused for 2 s is given back at any moment). */
export const money = async (id: string) => {
  const { leased_micro_usd: _, ...rest } = await position(id);
  return rest;
};
export const sha256 = (x: Uint8Array) => createHash('sha256').update(x).digest('hex');
export const job = (who: Caller, id: string) => call(who.c, 'GET', `/v1/videos/generations/${id}`);
export const loops = async () => expect(await t.gw.leader.runAllOnce()).toBe(true);
export const row = (id: string) => t.gw.database.db.selectFrom('video_jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** Creates a job and returns it with its upstream twin. */
export async function start(who: Caller, body: Record<string, unknown> = {}) {
  const r = await call(who.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'a fox running through snow', seconds: 8, ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return { id: r.body.id as string, view: r.body, upstream: up.lastVideo() };
}
