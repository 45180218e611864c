import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toFile } from 'openai';
import { Sealer } from '@svc/shared';
import { CHUNK_BYTES } from '../control-plane/src/db/sealed-chunks.ts';
import { call } from './support/call.ts';
import { storedChunks } from './support/chunks.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { startMediaUpstream, type MediaUpstream } from './support/media-upstream.ts';
import { until } from './support/agent.ts';
import { account, batchEnv, chatLine, drain, readLines, uploadLines } from './support/batches.ts';

/**
 * Content larger than one stored chunk (4 MiB), at the default limits: a batch input file, a batch's output
 * file and a video file go into the database in sealed chunks and come back whole, byte for byte, through
 * the official `openai` client and the video route. Before chunks, each was one bytea value: on the embedded
 * database a 64 MiB upload ran the process out of heap, and on Postgres a file over 256 MiB could be stored
 * but reading it back killed the process (node-postgres reads bytea as one hex string, past V8's limit).
 */
let up: TestUpstream;
let media: MediaUpstream;
let t: TestGateway;

beforeAll(async () => {
  up = await startUpstream();
  media = await startMediaUpstream();
  t = await startTestGateway({
    env: batchEnv(up.url, {
      SVC_VIDEO_PROVIDERS: JSON.stringify([{ name: 'vids', base_url: media.url, api_key: 'sk-v', models: [{ id: 'test-video', price_micro_usd_per_second: 1_000, max_seconds: 8, resolutions: ['1280x720'] }] }]),
    }),
  });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  await media?.close();
});

const sha256 = (x: Uint8Array) => createHash('sha256').update(x).digest('hex');
const chunksOf = (table: 'file_chunks' | 'video_chunks', owner: string) => storedChunks(t.gw.database.db, table, owner);

describe('content larger than a chunk', () => {
  it('a 64 MiB batch input is stored in 4 MiB sealed chunks and read back byte for byte; delete destroys them all', async () => {
    const a = await account(t, 0);
    const filler = 'x'.repeat(4000);
    const lines: string[] = [];
    for (let i = 0, size = 0; size < 64 * 1024 * 1024; i++) {
      const l = JSON.stringify(chatLine(`line-${i}`, filler));
      lines.push(l);
      size += l.length + 1;
    }
    const text = Buffer.from(`${lines.join('\n')}\n`);
    const f = await a.oa.files.create({ file: await toFile(text, 'big.jsonl'), purpose: 'batch' });
    expect(f.bytes).toBe(text.length);

    const chunks = await chunksOf('file_chunks', f.id);
    expect(chunks).toHaveLength(Math.ceil(text.length / CHUNK_BYTES));
    expect(chunks.every((c) => c.content.length <= CHUNK_BYTES + 29)).toBe(true);
    expect(chunks.map((c) => c.last)).toEqual(chunks.map((_, i) => i === chunks.length - 1));

    const res = await a.oa.files.content(f.id);
    expect(res.headers.get('content-length')).toBe(String(text.length));
    expect(sha256(Buffer.from(await res.arrayBuffer()))).toBe(sha256(text));

    await a.oa.files.delete(f.id);
    expect(await chunksOf('file_chunks', f.id)).toEqual([]);
  });

  it("a batch's output file larger than a chunk is written in chunks and reads back whole", async () => {
    // Four answers of about 1.2 MB each (40 words of 30,000 letters): about 4.8 MB of output.
    up.switches.reply = Array.from({ length: 40 }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(30_000)).join(' ');
    try {
      const a = await account(t, 100_000_000);
      const input = await uploadLines(a.oa, ['a', 'b', 'c', 'd'].map((id) => chatLine(id)));
      const created = await a.oa.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      const done = await drain(t, a.oa, created.id);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 4, failed: 0 } });
      const chunks = await chunksOf('file_chunks', done.output_file_id!);
      expect(chunks.length).toBeGreaterThan(1);
      const out = await readLines(a.oa, done.output_file_id);
      expect(out.map((l) => l.custom_id)).toEqual(['a', 'b', 'c', 'd']);
      for (const l of out) expect(l.response!.body.choices[0].message.content).toBe(up.switches.reply);
      expect((await a.oa.files.retrieve(done.output_file_id!)).bytes).toBe(out.reduce((n, l) => n + Buffer.byteLength(JSON.stringify(l)) + 1, 0));
    } finally {
      up.reset();
    }
  });

  it('a 9 MiB video is stored in three chunks as it downloads and read back whole; a download cut short leaves none; verify by its hash', async () => {
    media.switches.videoBytes = 9 * 1024 * 1024;
    try {
      const a = await account(t, 1_000_000);
      const c = t.client.withCredential({ kind: 'key', token: a.key });
      const r = await call(c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'a long take', seconds: 4 });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const upstream = media.lastVideo();
      media.advance(upstream.id, { status: 'completed', progress: 100 });
      // The connection drops after 6 MiB (a chunk was stored): the job stays open, with no chunk, for the next poll.
      media.switches.contentCutAfter = 6 * 1024 * 1024;
      await t.gw.leader.runAllOnce();
      expect((await call(c, 'GET', `/v1/videos/generations/${r.body.id}`)).body).toMatchObject({ status: 'queued', asset_available: false });
      expect(await chunksOf('video_chunks', r.body.id)).toEqual([]);
      // What an attempt whose process died mid-download left: the next attempt starts from nothing.
      await t.gw.database.db.insertInto('video_chunks').values({ owner_id: r.body.id, seq: 7, last: false, content: Buffer.from('stale') }).execute();
      media.switches.contentCutAfter = null;
      expect(await t.gw.leader.runAllOnce()).toBe(true);
      const bytes = media.content(upstream.id);
      expect(await chunksOf('video_chunks', r.body.id)).toHaveLength(3);

      const res = await c.raw('GET', `/v1/videos/generations/${r.body.id}/content`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-length')).toBe(String(bytes.length));
      const got = Buffer.from(await res.arrayBuffer());
      expect(sha256(got)).toBe(sha256(bytes));
      const job = await call(c, 'GET', `/v1/videos/generations/${r.body.id}`);
      const v = await call(c, 'POST', '/v1/videos/verify', { asset_sha256: sha256(got), manifest: job.body.manifest, signature: job.body.manifest_signature });
      expect(v.body).toMatchObject({ manifest_found: true, signature_valid: true, hash_matches: true });
    } finally {
      media.reset();
    }
  });

  it('a pass whose lease passed to another while its video downloaded neither adds chunks nor deletes them', async () => {
    media.switches.videoBytes = 9 * 1024 * 1024;
    media.switches.contentHoldAfter = 6 * 1024 * 1024;
    try {
      const a = await account(t, 1_000_000);
      const c = t.client.withCredential({ kind: 'key', token: a.key });
      const r = await call(c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'a stalled take', seconds: 4 });
      media.advance(media.lastVideo().id, { status: 'completed', progress: 100 });
      const pass = t.gw.leader.runAllOnce();
      await until('the first chunk is stored', async () => (await chunksOf('video_chunks', r.body.id)).length === 1);
      // The pass stalls past its lease; another pass takes the job (and, say, has stored this chunk itself).
      const db = t.gw.database.db;
      await db.updateTable('video_jobs').set({ lock_token: 'another-pass', locked_until: new Date(Date.now() + 3_600_000) }).where('id', '=', r.body.id).execute();
      media.releaseContent();
      await pass;
      expect(await chunksOf('video_chunks', r.body.id)).toHaveLength(1); // its next chunk refused, and its cleanup too
      expect(await db.selectFrom('video_jobs').select(['status', 'lock_token']).where('id', '=', r.body.id).executeTakeFirstOrThrow()).toEqual({ status: 'queued', lock_token: 'another-pass' });
      // That other pass went away: once its lease is over, the next pass stores the file from the start.
      await db.updateTable('video_jobs').set({ lock_token: null, locked_until: null }).where('id', '=', r.body.id).execute();
      media.switches.contentHoldAfter = null;
      expect(await t.gw.leader.runAllOnce()).toBe(true);
      expect((await call(c, 'GET', `/v1/videos/generations/${r.body.id}`)).body).toMatchObject({ status: 'succeeded', asset_available: true });
      expect(await chunksOf('video_chunks', r.body.id)).toHaveLength(3);
      const got = Buffer.from(await (await c.raw('GET', `/v1/videos/generations/${r.body.id}/content`)).arrayBuffer());
      expect(sha256(got)).toBe(sha256(media.content(media.lastVideo().id)));
    } finally {
      media.releaseContent();
      media.reset();
    }
  });

  it('content stored before chunks (one sealed column) still reads, feeds a batch, and is destroyed', async () => {
    // Rows written before chunks existed: the same content, sealed whole under aad = id, no chunk rows.
    const db = t.gw.database.db;
    const sealer = new Sealer(t.gw.sealKey);
    const toLegacy = async (table: 'files' | 'video_jobs', id: string, plain: Buffer) => {
      const column = table === 'files' ? 'content' : 'content_sealed';
      await db.updateTable(table).set({ [column]: sealer.seal(plain, id), content_chunks: null } as never).where('id', '=', id).execute();
      await db.deleteFrom(table === 'files' ? 'file_chunks' : 'video_chunks').where('owner_id', '=', id).execute();
    };

    const a = await account(t, 100_000_000);
    const text = Buffer.from(['a', 'b'].map((id) => JSON.stringify(chatLine(id))).join('\n') + '\n');
    const f = await a.oa.files.create({ file: await toFile(text, 'old.jsonl'), purpose: 'batch' });
    await toLegacy('files', f.id, text);
    expect(Buffer.from(await (await a.oa.files.content(f.id)).arrayBuffer()).equals(text)).toBe(true);
    const done = await drain(t, a.oa, (await a.oa.batches.create({ input_file_id: f.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 } });
    expect(await db.selectFrom('files').select(['content', 'content_chunks', 'content_destroyed_reason']).where('id', '=', f.id).executeTakeFirstOrThrow()).toEqual({ content: null, content_chunks: null, content_destroyed_reason: 'batch_ended' });

    const c = t.client.withCredential({ kind: 'key', token: a.key });
    const r = await call(c, 'POST', '/v1/videos/generations', { model: 'test-video', prompt: 'an old take', seconds: 4 });
    media.advance(media.lastVideo().id, { status: 'completed', progress: 100 });
    expect(await t.gw.leader.runAllOnce()).toBe(true);
    const bytes = media.content(media.lastVideo().id);
    await toLegacy('video_jobs', r.body.id, bytes);
    const res = await c.raw('GET', `/v1/videos/generations/${r.body.id}/content`);
    expect(res.headers.get('content-length')).toBe(String(bytes.length));
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    expect((await call(c, 'DELETE', `/v1/videos/generations/${r.body.id}`)).body).toMatchObject({ asset_available: false });
    expect(await db.selectFrom('video_jobs').select(['content_sealed', 'content_chunks']).where('id', '=', r.body.id).executeTakeFirstOrThrow()).toEqual({ content_sealed: null, content_chunks: null });
  });
});
