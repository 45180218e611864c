import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import OpenAI, { toFile } from 'openai';
import { CHUNK_BYTES } from '../control-plane/src/db/sealed-chunks.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { until } from './support/agent.ts';

/**
 * Uploads are read as they arrive (default limits): the file part is checked line by line and stored in
 * sealed chunks as it comes, so an upload at the limit is never whole in the gateway's memory. Whatever
 * ends an upload before its file row is stored (a bad line, the client going away, the process dying)
 * leaves no chunk behind.
 */
let t: TestGateway;
let key: string;

beforeAll(async () => {
  t = await startTestGateway({});
  key = (await (await t.signIn()).client.createKey()).key;
});
afterAll(async () => t?.close());

const BOUNDARY = 'stream0boundary';
const HEAD = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n`);
const TAIL = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
/** Batch lines of about 4 KB, `mib` MiB of them, numbered from `from`. */
function lines(mib: number, from = 0): Buffer {
  const out: string[] = [];
  for (let i = from, size = 0; size < mib * 1024 * 1024; i++) {
    const l = JSON.stringify({ custom_id: `l${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(4000) }] } });
    out.push(l);
    size += l.length + 1;
  }
  return Buffer.from(`${out.join('\n')}\n`);
}

/** An upload whose body the test sends piece by piece (`send`), ending it with `end` or `abort`. */
function streamedUpload() {
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctl = c) });
  const ac = new AbortController();
  const init = { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body, duplex: 'half', signal: ac.signal };
  const res = fetch(`${t.url}/v1/files`, init as RequestInit).then(
    async (r) => ({ status: r.status, body: (await r.json()) as { id?: string; error?: { type: string; message: string } } }),
    (e: unknown) => ({ status: 0, body: { error: { type: 'client', message: String(e) } } }),
  );
  return {
    res,
    send: (b: Buffer) => ctl.enqueue(new Uint8Array(b)),
    end: () => ctl.close(),
    abort: () => ac.abort(),
  };
}

const db = () => t.gw.database.db;
const uploads = () => db().selectFrom('file_uploads').selectAll().execute();
const chunksOf = (owner: string) => db().selectFrom('file_chunks').select('seq').where('owner_id', '=', owner).execute();
/** A streamed upload sent up to the file's `first` bytes, once a chunk of it is stored (the one upload in progress). */
async function begun(first: Buffer) {
  const u = streamedUpload();
  u.send(HEAD);
  u.send(first);
  const pending = await until('a chunk stored while the body still arrives', async () => {
    const [row, ...more] = await uploads();
    return row && more.length === 0 && (await chunksOf(row.file_id)).length >= 1 && row;
  });
  return { u, pending };
}
/** Chunks whose owner has no file row. */
const orphans = async () => (await sql<{ owner_id: string }>`select distinct owner_id from file_chunks where owner_id not in (select id from files)`.execute(db())).rows;

describe('uploads read as they arrive', () => {
  it('stores the chunks while the body still arrives; the file row only once it all checked out', async () => {
    const text = lines(9);
    const { u, pending } = await begun(text.subarray(0, 6 * 1024 * 1024));
    expect(await db().selectFrom('files').select('id').where('id', '=', pending.file_id).execute()).toEqual([]);
    u.send(text.subarray(6 * 1024 * 1024));
    u.send(TAIL);
    u.end();
    const r = await u.res;
    expect(r).toMatchObject({ status: 200, body: { id: pending.file_id } });
    expect(await chunksOf(pending.file_id)).toHaveLength(Math.ceil(text.length / CHUNK_BYTES));
    expect(await uploads()).toEqual([]);
    const got = await new OpenAI({ apiKey: key, baseURL: `${t.url}/v1` }).files.content(pending.file_id);
    expect(Buffer.from(await got.arrayBuffer()).equals(text)).toBe(true);
  });

  it('a bad line after chunks were stored is a 400 naming it, and the chunks go', async () => {
    const good = lines(6);
    const count = good.toString().split('\n').length - 1;
    const bad = Buffer.concat([good, Buffer.from('{"custom_id": "broken"\n')]);
    const e = await new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 }).files.create({ file: await toFile(bad, 'bad.jsonl'), purpose: 'batch' }).catch((x: unknown) => x);
    expect(e).toMatchObject({ status: 400, param: 'file', message: expect.stringContaining(`file: line ${count + 1}: not valid JSON`) });
    expect(await uploads()).toEqual([]);
    expect(await orphans()).toEqual([]);
  });

  it('a client that goes away half way leaves nothing', async () => {
    const { u, pending } = await begun(lines(6));
    u.abort();
    expect((await u.res).status).toBe(0);
    await until('the upload is discarded', async () => (await uploads()).length === 0 && (await chunksOf(pending.file_id)).length === 0);
    expect(await orphans()).toEqual([]);
  });

  it("the chunks of a process that died mid-upload are swept; a process's own uploads are not", async () => {
    const { u, pending } = await begun(lines(6));
    await t.gw.leader.runAllOnce();
    expect(await uploads()).toHaveLength(1); // its process is this one, alive
    // As if it were received by a process that has since died (no connection of it left in the database).
    await db().updateTable('file_uploads').set({ process_id: 'svc_p_gone0000000000' }).where('file_id', '=', pending.file_id).execute();
    await t.gw.leader.runAllOnce();
    expect(await uploads()).toHaveLength(1); // missing once: its connection may only be reconnecting
    await t.gw.leader.runAllOnce();
    expect(await uploads()).toEqual([]);
    expect(await chunksOf(pending.file_id)).toEqual([]);
    // This upload did not die after all: it cannot be stored without the chunks swept, so it is refused.
    u.send(lines(1, 100_000));
    u.send(TAIL);
    u.end();
    expect(await u.res).toMatchObject({ status: 503, body: { error: { type: 'unavailable' } } });
    expect(await db().selectFrom('files').select('id').where('id', '=', pending.file_id).execute()).toEqual([]);
    expect(await orphans()).toEqual([]);
  });

  it('a refusal early in a large body reaches a client that sends the whole body before it reads the answer', async () => {
    const body = Buffer.concat([HEAD, Buffer.from('{"custom_id": broken\n'), lines(20), TAIL]);
    const u = new URL(t.url);
    const sock = connect(Number(u.port), u.hostname);
    try {
      const head = `POST /v1/files HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${body.length}\r\n\r\n`;
      // Nothing is read from the socket until all of the body is written (20 MiB: far more than the socket buffers hold).
      await new Promise<void>((resolve, reject) => {
        sock.once('error', reject);
        sock.write(head);
        sock.write(body, (e) => (e ? reject(e) : resolve()));
      });
      const answer = await new Promise<string>((resolve) => {
        let got = '';
        sock.on('data', (d: Buffer) => {
          got += d.toString();
          if (got.includes('\r\n\r\n{') && got.endsWith('}')) resolve(got);
        });
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain('file: line 1: not valid JSON');
    } finally {
      sock.destroy();
    }
    await until('nothing left of it', async () => (await uploads()).length === 0 && (await orphans()).length === 0);
  });

  it('a purpose part is refused as it grows past a few bytes; a body past the limit without a length is a 413', async () => {
    const rawHead = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n`;
    const big = streamedUpload();
    big.send(Buffer.from(rawHead));
    for (let i = 0; i < 4; i++) big.send(Buffer.alloc(1 << 20, 'b'));
    big.end();
    expect(await big.res).toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'purpose' } } });

    // A whole upload, then an epilogue that takes the body past the route's limit (no Content-Length: chunked).
    const long = streamedUpload();
    long.send(HEAD);
    long.send(lines(1));
    long.send(TAIL);
    for (let i = 0; i < 102; i++) long.send(Buffer.alloc(1 << 20, 'e'));
    long.end();
    expect(await long.res).toMatchObject({ status: 413, body: { error: { type: 'payload_too_large' } } });
    expect(await uploads()).toEqual([]);
    expect(await orphans()).toEqual([]);
  });
});
