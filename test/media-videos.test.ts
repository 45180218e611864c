import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { verifyMessage } from 'ethers';
import canonicalizeJson from 'canonicalize';
import { Sealer } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { call } from './support/call.ts';
import { storedChunks } from './support/chunks.ts';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { makePng, startMediaUpstream, type MediaUpstream } from './support/media-upstream.ts';

/**
 * Video jobs against a real OpenAI Videos API server on loopback; billing enforced. The test moves the
 * upstream render along and drives the leader's loops with runAllOnce; time moves on the ManualClock.
 * Price 1,000 micro-USD per second, maximum 12 s, so every hold is 12,000 and a charge is checkable by hand.
 */
const PRICE = 1_000;
const HOLD = 12 * PRICE;
const TTL = 3_600;
const RENDER_LIMIT = 600;
let up: MediaUpstream;
let t: TestGateway;
let a: Caller;
let b: Caller;

interface Caller {
  accountId: string;
  key: string;
  c: SvcClient;
}

const env = () => ({
  ...ENFORCED_BILLING,
  SVC_MEDIA_TIMEOUT_SECONDS: '5',
  SVC_VIDEO_TTL_SECONDS: String(TTL),
  SVC_VIDEO_RENDER_TIMEOUT_SECONDS: String(RENDER_LIMIT),
  SVC_HOLD_TTL_SECONDS: '60', // request holds expire quickly; a render's hold must outlive its time limit
  SVC_VIDEO_PROVIDERS: JSON.stringify([
    { name: 'vids', base_url: up.url, api_key: 'sk-video-upstream', models: [{ id: 'test-video', price_micro_usd_per_second: PRICE, max_seconds: 12, seconds: [4, 8, 12], resolutions: ['1280x720', '720x1280'] }] },
  ]),
});

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

async function funded(micro: number): Promise<Caller> {
  const { accountId, key } = await fundedKey(t, micro);
  return { accountId, key, c: t.client.withCredential({ kind: 'key', token: key }) };
}
const position = (id: string) => t.gw.services.metering.position(id);
const sha256 = (x: Uint8Array) => createHash('sha256').update(x).digest('hex');
const job = (who: Caller, id: string) => call(who.c, 'GET', `/v1/videos/generations/${id}`);
const loops = async () => expect(await t.gw.leader.runAllOnce()).toBe(true);
const row = (id: string) => t.gw.database.db.selectFrom('video_jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** Creates a job and returns it with its upstream twin. */
async function start(who: Caller, body: Record<string, unknown> = {}) {
  const r = await call(who.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'a fox running through snow', seconds: 8, ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return { id: r.body.id as string, view: r.body, upstream: up.lastVideo() };
}

describe('a render from creation to download', () => {
  it('holds the maximum duration, follows the upstream, settles on the actual duration, seals the file, signs a manifest', async () => {
    const before = await position(a.accountId);
    const { id, view, upstream } = await start(a);
    expect(id).toMatch(/^vid_[0-9a-z]{24}$/);
    expect(view).toMatchObject({ object: 'video.generation', model: 'test-video', status: 'queued', progress: 0, seconds: 8, size: '1280x720', reserved_micro_usd: HOLD, cost_micro_usd: null, billed: false, asset_available: false, receipt: null, manifest: null });
    expect(up.requests.find((r) => r.method === 'POST')).toMatchObject({ path: '/v1/videos', authorization: 'Bearer sk-video-upstream', body: { model: 'test-video', prompt: 'a fox running through snow', seconds: '8', size: '1280x720' } });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd, held_micro_usd: HOLD });

    up.advance(upstream.id, { status: 'in_progress', progress: 40 });
    await loops();
    expect((await job(a, id)).body).toMatchObject({ status: 'running', progress: 40, cost_micro_usd: null });
    t.clock.advance(5 * 60_000); // past the request-hold TTL, within the render time limit: still reserved
    await loops();
    expect(await position(a.accountId)).toMatchObject({ held_micro_usd: HOLD });

    // The provider rendered 7.5 s of the 8 asked for: the charge follows what was rendered.
    up.advance(upstream.id, { status: 'completed', progress: 100, seconds: '7.5' });
    await loops();
    const done = (await job(a, id)).body;
    const cost = Math.ceil(7.5 * PRICE);
    expect(done).toMatchObject({ status: 'succeeded', progress: 100, duration_seconds: 7.5, cost_micro_usd: cost, billed: true, asset_available: true, content_bytes: up.content(upstream.id).length });
    expect(Date.parse(done.expires_at) - Date.parse(done.completed_at)).toBe(TTL * 1000);
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - cost, held_micro_usd: 0 });

    // Receipt: signed, metadata only, billing the actual seconds.
    expect(verifyMessage(done.receipt.canonical, done.receipt.signature)).toBe(t.gw.services.signer.address);
    expect(JSON.parse(done.receipt.canonical)).toMatchObject({ kind: 'video', model: 'test-video', route: 'POST /v1/videos/generations', units: { seconds: 7.5 }, cost_micro_usd: cost, detail: { job_id: id, held_micro_usd: HOLD } });
    // Manifest beside the asset: covers the mp4 bytes and the receipt.
    const bytes = up.content(upstream.id);
    expect(done.manifest).toMatchObject({ v: 1, type: 'svc.provenance', media_type: 'video/mp4', asset_sha256: sha256(bytes), job_id: id, receipt_id: done.receipt.id, receipt_hash: done.receipt.hash, signer: t.gw.services.signer.address });
    expect(verifyMessage(canonicalizeJson(done.manifest)!, done.manifest_signature)).toBe(t.gw.services.signer.address);

    // The file: as an attachment, byte for byte; sealed at rest; the upstream copy deleted.
    const res = await a.c.raw('GET', `/v1/videos/generations/${id}/content`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('video/mp4');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${id}.mp4"`);
    const got = Buffer.from(await res.arrayBuffer());
    expect(got.equals(bytes)).toBe(true);
    const [chunk, ...more] = await storedChunks(t.gw.database.db, 'video_chunks', id);
    expect(more).toEqual([]);
    const stored = Buffer.from(chunk!.content);
    expect(stored.includes(bytes.subarray(0, 64))).toBe(false);
    expect(new Sealer(t.gw.sealKey).open(stored, `${id}:0:last`).equals(bytes)).toBe(true);
    expect(() => new Sealer(t.gw.sealKey).open(stored, 'vid_other:0:last')).toThrow();
    expect(up.requests.some((r) => r.method === 'DELETE' && r.path === `/v1/videos/${upstream.id}`)).toBe(true);

    // verify: the asset with the manifest kept beside it; a changed byte breaks only the hash.
    const v = await call(a.c, 'POST', '/v1/videos/verify', { asset_b64: got.toString('base64'), manifest: done.manifest, signature: done.manifest_signature });
    expect(v.body).toMatchObject({ manifest_found: true, signature_valid: true, hash_matches: true, signer_is_gateway: true, verified: true });
    got[100] = got[100]! ^ 0xff;
    const bad = await call(a.c, 'POST', '/v1/videos/verify', { asset_b64: got.toString('base64'), manifest: done.manifest, signature: done.manifest_signature });
    expect(bad.body).toMatchObject({ signature_valid: true, hash_matches: false, verified: false });
  });

  it('image-to-video passes the image as input_reference; aspect_ratio picks the resolution', async () => {
    const image = `data:image/png;base64,${makePng(4, 4, [1, 2, 3]).toString('base64')}`;
    const { id, view } = await start(a, { image, aspect_ratio: '9:16', seconds: '4' });
    expect(view).toMatchObject({ size: '720x1280', seconds: 4, image_input: true });
    expect(up.requests.at(-1)!.body).toMatchObject({ size: '720x1280', seconds: '4', input_reference: { image_url: image } });
    expect((await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`)).body.status).toBe('canceled');
  });
});

describe('failure, cancel, delete, expiry', () => {
  it('an upstream failure releases the hold and bills nothing', async () => {
    const before = await position(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'failed', error: { code: 'moderation', message: 'blocked by moderation' } });
    await loops();
    expect((await job(a, id)).body).toMatchObject({ status: 'failed', billed: false, cost_micro_usd: 0, error: { type: 'upstream_error', message: 'blocked by moderation' }, receipt: null, asset_available: false });
    expect(await position(a.accountId)).toEqual(before);
  });

  it('cancel while rendering: stopped upstream, hold released, nothing billed; idempotent', async () => {
    const before = await position(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'in_progress', progress: 10 });
    await loops();
    const r = await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'canceled', billed: false, cost_micro_usd: 0, receipt: null });
    expect(up.requests.at(-1)).toMatchObject({ method: 'DELETE', path: `/v1/videos/${upstream.id}` });
    expect(await position(a.accountId)).toEqual(before);
    await loops();
    expect((await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`)).body).toMatchObject({ status: 'canceled', billed: false });
    expect(await position(a.accountId)).toEqual(before);
  });

  it('cancel after the render finished: delivered and billed (billed: true)', async () => {
    const before = await position(a.accountId);
    const { id, upstream } = await start(a, { seconds: 12 });
    up.advance(upstream.id, { status: 'completed', progress: 100 }); // finished upstream; the loop has not seen it yet
    const r = await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`);
    expect(r.body).toMatchObject({ status: 'succeeded', billed: true, cost_micro_usd: HOLD, asset_available: true });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - HOLD, held_micro_usd: 0 });
    expect((await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`)).body).toMatchObject({ status: 'succeeded', billed: true });
    expect((await a.c.raw('GET', `/v1/videos/generations/${id}/content`)).status).toBe(200);
  });

  it('DELETE destroys the file now; the content-free row and its receipt remain; 409 while rendering', async () => {
    const { id, upstream } = await start(a);
    expect((await call(a.c, 'DELETE', `/v1/videos/generations/${id}`)).body.error).toMatchObject({ type: 'conflict' });
    up.advance(upstream.id, { status: 'completed' });
    await loops();
    const d = await call(a.c, 'DELETE', `/v1/videos/generations/${id}`);
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ status: 'succeeded', asset_available: false, content_destroyed_at: expect.any(String), billed: true, receipt: { id: expect.any(String) }, manifest: { job_id: id } });
    expect(await row(id)).toMatchObject({ content_sealed: null, content_chunks: null });
    expect(await storedChunks(t.gw.database.db, 'video_chunks', id)).toEqual([]);
    const receipt = await t.gw.database.db.selectFrom('receipts').select('id').where('id', '=', d.body.receipt.id).executeTakeFirst();
    expect(receipt).toBeDefined();
    expect((await call(a.c, 'GET', `/v1/videos/generations/${id}/content`)).body.error).toMatchObject({ type: 'not_found' });
    expect((await call(a.c, 'DELETE', `/v1/videos/generations/${id}`)).body.content_destroyed_at).toBe(d.body.content_destroyed_at);
  });

  it('past expires_at a job is expired and its file destroyed', async () => {
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'completed' });
    await loops();
    expect((await a.c.raw('GET', `/v1/videos/generations/${id}/content`)).status).toBe(200);
    t.clock.advance(TTL * 1000);
    expect((await job(a, id)).body).toMatchObject({ status: 'expired', asset_available: false });
    await loops();
    const r = await row(id);
    expect(r).toMatchObject({ status: 'expired', content_sealed: null, content_chunks: null });
    expect(await storedChunks(t.gw.database.db, 'video_chunks', id)).toEqual([]);
    expect(r.content_destroyed_at).not.toBeNull();
    expect((await call(a.c, 'GET', `/v1/videos/generations/${id}/content`)).body.error).toMatchObject({ type: 'not_found' });
    expect((await job(a, id)).body).toMatchObject({ status: 'expired', billed: true, receipt: { id: expect.any(String) } });
  });

  it('a render past the time limit fails, is deleted upstream, and bills nothing', async () => {
    const before = await position(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'in_progress', progress: 90 });
    t.clock.advance(RENDER_LIMIT * 1000);
    await loops();
    expect((await job(a, id)).body).toMatchObject({ status: 'failed', billed: false, cost_micro_usd: 0, error: { type: 'upstream_timeout' } });
    expect(up.videos.get(upstream.id)!.deleted).toBe(true);
    expect(await position(a.accountId)).toEqual(before);
  });
});

describe('late polls, failed downloads, a crash after the charge', () => {
  const LEASE_MS = 2 * 5_000 + 60_000; // 2 x SVC_MEDIA_TIMEOUT_SECONDS + 60 s

  it('a render that finished is delivered and billed however late the poll comes; one whose file cannot be fetched is given up before its hold ends', async () => {
    const before = await position(a.accountId);
    const done = await start(a, { seconds: 4 });
    up.advance(done.upstream.id, { status: 'completed', progress: 100 });
    t.clock.advance(RENDER_LIMIT * 1000); // the leader was away past the time limit
    up.switches.failWith = 503; // and the provider fails its first lookup: tried again, not given up
    await loops();
    up.switches.failWith = null;
    expect((await job(a, done.id)).body).toMatchObject({ status: 'queued', billed: false });
    await loops();
    expect((await job(a, done.id)).body).toMatchObject({ status: 'succeeded', billed: true, cost_micro_usd: 4 * PRICE, error: null });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - 4 * PRICE, held_micro_usd: 0 });

    const stuck = await start(a, { seconds: 4 });
    up.advance(stuck.upstream.id, { status: 'completed', progress: 100 });
    up.switches.contentFailWith = 503;
    t.clock.advance(RENDER_LIMIT * 1000);
    await loops();
    expect((await job(a, stuck.id)).body).toMatchObject({ status: 'queued', billed: false }); // tried again on the next pass
    t.clock.advance(300_000); // 300 s past the limit: given up, 2 x the media timeout + 300 s before its hold ends
    await loops();
    expect((await job(a, stuck.id)).body).toMatchObject({ status: 'failed', billed: false, error: { type: 'upstream_timeout' } });
    expect(up.videos.get(stuck.upstream.id)!.deleted).toBe(true);
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - 4 * PRICE, held_micro_usd: 0 });
  });

  it('cancel of a finished render whose file cannot be fetched now is a 409, and the render is then delivered and billed', async () => {
    const before = await position(a.accountId);
    const { id, upstream } = await start(a, { seconds: 4 });
    up.advance(upstream.id, { status: 'completed', progress: 100 });
    up.switches.contentFailWith = 503;
    const c = await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`);
    expect(c.status).toBe(409);
    expect(c.body.error.message).toMatch(/delivered and billed/);
    expect(up.videos.get(upstream.id)!.deleted).toBe(false);
    up.switches.contentFailWith = null;
    await loops();
    expect((await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`)).body).toMatchObject({ status: 'succeeded', billed: true, cost_micro_usd: 4 * PRICE });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - 4 * PRICE, held_micro_usd: 0 });
  });

  it('a process that died after the charge committed and before the job row was written: the next pass finishes the job on that charge', async () => {
    const db = t.gw.database.db;
    const before = await position(a.accountId);
    const { id, upstream } = await start(a, { seconds: 8 });
    // The first write of `succeeded` fails, as if the process died right after the settle committed.
    await sql`create sequence crash_once`.execute(db);
    await sql
      .raw(
        `create function crash_once() returns trigger language plpgsql as $$ begin
           if new.status = 'succeeded' and old.status <> 'succeeded' and nextval('crash_once') = 1 then raise exception 'simulated crash after the settle'; end if;
           return new; end $$`,
      )
      .execute(db);
    await sql`create trigger crash_once before update on video_jobs for each row execute function crash_once()`.execute(db);
    try {
      up.advance(upstream.id, { status: 'completed', progress: 100 });
      await loops();
      expect(await row(id)).toMatchObject({ status: 'queued', billed: false });
      expect((await position(a.accountId)).balance_micro_usd).toBe(before.balance_micro_usd - 8 * PRICE);
      t.clock.advance(LEASE_MS); // the lease of the dead pass ran out
      await loops();
    } finally {
      await sql`drop trigger crash_once on video_jobs`.execute(db);
      await sql`drop function crash_once()`.execute(db);
      await sql`drop sequence crash_once`.execute(db);
    }
    const receipts = await db.selectFrom('receipts').select('id').where('account_id', '=', a.accountId).where('kind', '=', 'video').where('payload', 'like', `%${id}%`).execute();
    expect(receipts).toHaveLength(1);
    const v = (await job(a, id)).body;
    expect(v).toMatchObject({ status: 'succeeded', billed: true, cost_micro_usd: 8 * PRICE, duration_seconds: 8, receipt: { id: receipts[0]!.id }, manifest: { receipt_id: receipts[0]!.id } });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - 8 * PRICE, held_micro_usd: 0 });
    expect((await a.c.raw('GET', `/v1/videos/generations/${id}/content`)).status).toBe(200);
  });
});

describe('admission and access', () => {
  it('402 before any upstream call when the maximum duration cannot be held; no row is written', async () => {
    const poor = await funded(HOLD - 1);
    const r = await call(poor.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'x', seconds: 4 });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ type: 'insufficient_credit', required_micro_usd: HOLD });
    expect(up.requests).toHaveLength(0);
    expect(await t.gw.database.db.selectFrom('video_jobs').select('id').where('account_id', '=', poor.accountId).execute()).toEqual([]);
  });

  it('bad input is a 4xx naming the field, with nothing held or written; an upstream refusal leaves nothing behind', async () => {
    const before = await position(a.accountId);
    const count = async () => (await t.gw.database.db.selectFrom('video_jobs').select('id').where('account_id', '=', a.accountId).execute()).length;
    const rows = await count();
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ seconds: 5 }, 400, 'seconds'],
      [{ seconds: 13 }, 400, 'seconds'],
      [{ seconds: 'eight' }, 400, 'seconds'],
      [{ size: '640x480' }, 400, 'size'],
      [{ aspect_ratio: '4:3' }, 400, 'aspect_ratio'],
      [{ aspect_ratio: '9:16', size: '1280x720' }, 400, 'aspect_ratio'],
      [{ image: 'ftp://example.com/a.png' }, 400, 'image'],
      [{ prompt: '' }, 400, 'prompt'],
      [{ model: 'nope' }, 404, 'model'],
    ];
    for (const [over, status, param] of cases) {
      const r = await call(a.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'x', ...over });
      expect({ status: r.status, param: r.body.error?.param }, JSON.stringify(over)).toEqual({ status, param });
    }
    expect(up.requests).toHaveLength(0);
    up.switches.failWith = 400;
    const refused = await call(a.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'x' });
    expect(refused).toMatchObject({ status: 400, body: { error: { type: 'invalid_request', message: expect.stringContaining('rejected by the safety system') } } });
    up.switches.failWith = 503;
    expect((await call(a.c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'x' })).status).toBe(502);
    expect(await count()).toBe(rows);
    expect(await position(a.accountId)).toEqual(before);
  });

  it("lists the caller's jobs newest first, ?limit= 1-200 (default 50); another account's job is 404 everywhere", async () => {
    const first = await start(b);
    t.clock.advance(1000);
    const second = await start(b);
    const list = await call(b.c, 'GET', '/v1/videos/generations');
    expect(list.status).toBe(200);
    expect(list.body.object).toBe('list');
    expect(list.body).not.toHaveProperty('has_more');
    expect(list.body.data.map((j: { id: string }) => j.id)).toEqual([second.id, first.id]);
    expect((await call(b.c, 'GET', '/v1/videos/generations?limit=1')).body.data.map((j: { id: string }) => j.id)).toEqual([second.id]);
    for (const bad of ['0', '201', 'x', '1.5']) {
      const r = await call(b.c, 'GET', `/v1/videos/generations?limit=${bad}`);
      expect({ status: r.status, param: r.body.error?.param }, bad).toEqual({ status: 400, param: 'limit' });
    }
    const many = await call(a.c, 'GET', '/v1/videos/generations?limit=200');
    expect(many.body.data.some((j: { id: string }) => j.id === first.id)).toBe(false);

    for (const [method, suffix] of [['GET', ''], ['GET', '/content'], ['POST', '/cancel'], ['DELETE', '']] as const) {
      const r = await call(a.c, method, `/v1/videos/generations/${first.id}${suffix}`);
      expect({ status: r.status, type: r.body.error?.type }, `${method} ${suffix}`).toEqual({ status: 404, type: 'not_found' });
      const unknown = await call(a.c, method, `/v1/videos/generations/vid_doesnotexist${suffix}`);
      expect(unknown.body.error.message).toBe(r.body.error.message.replace(first.id, 'vid_doesnotexist'));
    }
    expect((await job(b, first.id)).body.status).toBe('queued');
    expect((await call(b.c, 'GET', `/v1/videos/generations/${first.id}/content`)).body.error).toMatchObject({ type: 'conflict' });
  });
});

describe('verifying a video too large for the verify body limit', () => {
  // SVC_MEDIA_VERIFY_BODY_BYTES (64 MiB by default) is below the base64 of the largest video this gateway
  // stores (SVC_MEDIA_MAX_ASSET_BYTES, 256 MiB): the same relation, scaled down to the test's 4 KiB video.
  let small: TestGateway;
  beforeAll(async () => {
    small = await startTestGateway({ env: { ...env(), SVC_MEDIA_VERIFY_BODY_BYTES: '4096' } });
  });
  afterAll(async () => {
    await small?.close();
  });

  it('a video this gateway produced is verified by its sha256; sending it whole is a 413 that says so', async () => {
    const { key } = await fundedKey(small, 1_000_000);
    const c = small.client.withCredential({ kind: 'key', token: key });
    const r = await call(c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'a large video', seconds: 4 });
    expect(r.status).toBe(202);
    up.advance(up.lastVideo().id, { status: 'completed', progress: 100 });
    expect(await small.gw.leader.runAllOnce()).toBe(true);
    const done = (await call(c, 'GET', `/v1/videos/generations/${r.body.id}`)).body;
    expect(done).toMatchObject({ status: 'succeeded', asset_available: true });
    const file = Buffer.from(await (await c.raw('GET', `/v1/videos/generations/${r.body.id}/content`)).arrayBuffer());
    expect(file.length).toBeGreaterThan(4096 * 0.75);
    const beside = { manifest: done.manifest, signature: done.manifest_signature };

    const whole = await call(c, 'POST', '/v1/videos/verify', { asset_b64: file.toString('base64'), ...beside });
    expect(whole.status).toBe(413);
    expect(whole.body.error).toMatchObject({ type: 'payload_too_large', message: expect.stringContaining('asset_sha256') });

    const byHash = await call(c, 'POST', '/v1/videos/verify', { asset_sha256: sha256(file), ...beside });
    expect(byHash.status).toBe(200);
    expect(byHash.body).toMatchObject({ manifest_found: true, signature_valid: true, hash_matches: true, signer_is_gateway: true, asset_sha256: sha256(file), verified: true, reasons: [] });
    const upper = await call(c, 'POST', '/v1/images/verify', { asset_sha256: sha256(file).toUpperCase(), ...beside });
    expect(upper.body).toMatchObject({ hash_matches: true, verified: true });

    file[100] = file[100]! ^ 0xff;
    const changed = await call(c, 'POST', '/v1/videos/verify', { asset_sha256: sha256(file), ...beside });
    expect(changed.body).toMatchObject({ signature_valid: true, hash_matches: false, verified: false });
    for (const [body, param] of [
      [{ asset_sha256: 'abc', ...beside }, 'asset_sha256'],
      [{ asset_sha256: sha256(file), asset_b64: 'AAAA', ...beside }, 'asset_sha256'],
    ] as const) {
      const bad = await call(c, 'POST', '/v1/videos/verify', body);
      expect({ status: bad.status, param: bad.body.error?.param }).toEqual({ status: 400, param });
    }
  });
});
