import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { call } from './support/call.ts';
import { fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { HOLD, PRICE, RENDER_LIMIT, a, b, env, funded, job, loops, money, position, row, sha256, start, t, up, useVideoGateway } from './support/videos.ts';

/**
 * Video jobs at their edges, against a real OpenAI Videos API server on loopback (test/support/videos.ts):
 * late polls, failed downloads and a crash after the charge; admission (402, bad input) and access; verifying
 * a video too large to send whole.
 */
useVideoGateway();

describe('late polls, failed downloads, a crash after the charge', () => {
  const LEASE_MS = 2 * 5_000 + 60_000; // 2 x SVC_MEDIA_TIMEOUT_SECONDS + 60 s

  it('a render that finished is delivered and billed however late the poll comes; one whose file cannot be fetched is given up before its hold ends', async () => {
    const before = await money(a.accountId);
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
    const before = await money(a.accountId);
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
    const before = await money(a.accountId);
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
    const before = await money(a.accountId);
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
    expect(await money(a.accountId)).toEqual(before);
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
