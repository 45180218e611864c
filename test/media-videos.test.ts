import { describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import canonicalizeJson from 'canonicalize';
import { Sealer } from '@svc/shared';
import { call } from './support/call.ts';
import { storedChunks } from './support/chunks.ts';
import { makePng } from './support/media-upstream.ts';
import { HOLD, PRICE, RENDER_LIMIT, TTL, a, job, loops, money, position, row, sha256, start, t, up, useVideoGateway } from './support/videos.ts';

/**
 * Video jobs from creation to download, and their failure, cancel, delete and expiry, against a real OpenAI
 * Videos API server on loopback (test/support/videos.ts). Late polls, crashes and admission are in
 * media-videos-edges.test.ts.
 */
useVideoGateway();

describe('a render from creation to download', () => {
  it('holds the maximum duration, follows the upstream, settles on the actual duration, seals the file, signs a manifest', async () => {
    const before = await money(a.accountId);
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
    const before = await money(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'failed', error: { code: 'moderation', message: 'blocked by moderation' } });
    await loops();
    expect((await job(a, id)).body).toMatchObject({ status: 'failed', billed: false, cost_micro_usd: 0, error: { type: 'upstream_error', message: 'blocked by moderation' }, receipt: null, asset_available: false });
    expect(await money(a.accountId)).toEqual(before);
  });

  it('cancel while rendering: stopped upstream, hold released, nothing billed; idempotent', async () => {
    const before = await money(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'in_progress', progress: 10 });
    await loops();
    const r = await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'canceled', billed: false, cost_micro_usd: 0, receipt: null });
    expect(up.requests.at(-1)).toMatchObject({ method: 'DELETE', path: `/v1/videos/${upstream.id}` });
    expect(await money(a.accountId)).toEqual(before);
    await loops();
    expect((await call(a.c, 'POST', `/v1/videos/generations/${id}/cancel`)).body).toMatchObject({ status: 'canceled', billed: false });
    expect(await money(a.accountId)).toEqual(before);
  });

  it('cancel after the render finished: delivered and billed (billed: true)', async () => {
    const before = await money(a.accountId);
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
    const before = await money(a.accountId);
    const { id, upstream } = await start(a);
    up.advance(upstream.id, { status: 'in_progress', progress: 90 });
    t.clock.advance(RENDER_LIMIT * 1000);
    await loops();
    expect((await job(a, id)).body).toMatchObject({ status: 'failed', billed: false, cost_micro_usd: 0, error: { type: 'upstream_timeout' } });
    expect(up.videos.get(upstream.id)!.deleted).toBe(true);
    expect(await money(a.accountId)).toEqual(before);
  });
});
