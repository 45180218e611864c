import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { toFile } from 'openai';
import { Sealer } from '@svc/shared';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { storedChunks } from './support/chunks.ts';
import { loadConfig } from '../control-plane/src/config.ts';

/**
 * /v1/files with the official `openai` client: multipart upload of batch input JSONL (checked line by line),
 * sealed at rest, hard TTL, delete that destroys the ciphertext at once, and no sight of other accounts.
 */
const MAX_BYTES = 8192;
const TTL_S = 3600;
let t: TestGateway;
let key: string;
let oa: OpenAI;

beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_FILE_MAX_BYTES: String(MAX_BYTES), SVC_FILE_TTL_SECONDS: String(TTL_S), SVC_BATCH_MAX_LINES: '50' } });
  key = (await (await t.signIn()).client.createKey()).key;
  oa = client(key);
});
afterAll(async () => t?.close());

function client(apiKey: string) {
  return new OpenAI({ apiKey, baseURL: `${t.url}/v1`, maxRetries: 0 });
}
const chat = (id: string, content = 'hello') => ({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'test-chat', messages: [{ role: 'user', content }] } });
const jsonl = (lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
const upload = async (text: string | Buffer, c = oa, name = 'in.jsonl') => c.files.create({ file: await toFile(Buffer.from(text), name), purpose: 'batch' });
const row = (id: string) => t.gw.database.db.selectFrom('files').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const chunks = (id: string) => storedChunks(t.gw.database.db, 'file_chunks', id);

/** A raw multipart request, for what the SDK would never send. */
async function rawUpload(parts: Array<{ name: string; value: string; filename?: string }>, apiKey = key) {
  const boundary = 'testboundary42';
  const body = parts.map((p) => `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${p.filename ? `; filename="${p.filename}"` : ''}\r\n\r\n${p.value}\r\n`).join('') + `--${boundary}--\r\n`;
  const res = await fetch(`${t.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
  return { status: res.status, body: (await res.json()) as { error: { type: string; message: string; param?: string; line?: number } } };
}

describe('configuration', () => {
  it('has the documented defaults and names a bad variable', () => {
    expect(loadConfig({ SVC_DATA_DIR: '/tmp/x' }).batches).toEqual({ fileTtlSeconds: 7 * 24 * 3600, fileMaxBytes: 100 * 1024 * 1024, maxLines: 50_000, discountPercent: 0, concurrency: 4, linesPerTick: 200, batchesPerTick: 200 });
    expect(() => loadConfig({ SVC_BATCH_DISCOUNT_PERCENT: '150' })).toThrow(/SVC_BATCH_DISCOUNT_PERCENT/);
    expect(() => loadConfig({ SVC_FILE_TTL_SECONDS: 'soon' })).toThrow(/SVC_FILE_TTL_SECONDS/);
    // Under an hour a batch would get little or no window (it ends a minute before its input's TTL).
    expect(() => loadConfig({ SVC_FILE_TTL_SECONDS: '60' })).toThrow(/SVC_FILE_TTL_SECONDS/);
  });
});

describe('upload and read back (openai SDK)', () => {
  it('stores a batch input sealed at rest and serves metadata, the list and the exact bytes', async () => {
    const text = jsonl([chat('a', 'the secret word is marmalade'), chat('b')]);
    const f = await upload(text, oa, 'requests.jsonl');
    expect(f).toMatchObject({ object: 'file', purpose: 'batch', filename: 'requests.jsonl', bytes: Buffer.byteLength(text), status: 'processed', status_details: null });
    expect(f.id).toMatch(/^file-[0-9a-z]{24}$/);
    expect(f.expires_at).toBe(f.created_at + TTL_S);

    expect(await oa.files.retrieve(f.id)).toEqual(f);
    const list = await oa.files.list();
    expect(list.data[0]).toEqual(f);
    expect(await (await oa.files.content(f.id)).text()).toBe(text);

    const r = await row(f.id);
    const [chunk, ...more] = await chunks(f.id);
    expect(more).toEqual([]);
    const sealed = Buffer.from(chunk!.content);
    expect(sealed.includes(Buffer.from('marmalade'))).toBe(false);
    expect(new Sealer(t.gw.sealKey).open(sealed, `${f.id}:0:last`).toString('utf8')).toBe(text);
    expect(() => new Sealer(t.gw.sealKey).open(sealed, `file-other:0:last`)).toThrow(); // bound to its file
    expect(() => new Sealer(t.gw.sealKey).open(sealed, `${f.id}:0:more`)).toThrow(); // and to its place
    expect(r).toMatchObject({ lines: 2, endpoints: ['/v1/chat/completions'], key_id: expect.stringMatching(/^key_/), content: null, content_chunks: 1 });
  });

  it('lists newest first, filters by purpose, and caps at 200', async () => {
    const s = await t.signIn();
    const c = client((await s.client.createKey()).key);
    const oldest = await upload(jsonl([chat('x')]), c);
    const ids: string[] = [];
    for (let i = 0; i < 200; i += 20) ids.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => upload(jsonl([chat(`x${i + j}`)]), c)))).map((f) => f.id));
    const listed = (await c.files.list()).data;
    expect(listed).toHaveLength(200);
    expect(new Set(listed.map((f) => f.id))).toEqual(new Set(ids)); // the oldest of 201 is past the cap
    expect(listed.map((f) => f.id)).not.toContain(oldest.id);
    expect((await c.files.list({ limit: 3 } as never)).data).toHaveLength(3);
    expect((await c.files.list({ purpose: 'batch_output' })).data).toEqual([]);
    const last = await upload(jsonl([chat('newest')]), c);
    expect((await c.files.list()).data[0]!.id).toBe(last.id);
  });
});

describe('checks at upload', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['invalid JSON', `${JSON.stringify(chat('a'))}\n{nope\n`, /^file: line 2: not valid JSON/],
    ['an array', '[1,2]\n', /^file: line 1: must be a JSON object/],
    ['a missing custom_id', JSON.stringify({ method: 'POST', url: '/v1/chat/completions', body: {} }), /^file: line 1: custom_id must be a string/],
    ['a GET', JSON.stringify({ ...chat('a'), method: 'GET' }), /^file: line 1: method must be "POST"/],
    ['an unsupported url', jsonl([chat('a'), { ...chat('b'), url: '/v1/images/generations' }]), /^file: line 2: url must be one of \/v1\/chat\/completions, \/v1\/embeddings/],
    ['a repeated custom_id', jsonl([chat('a'), chat('b'), chat('a')]), /^file: line 3: custom_id "a" repeats line 1/],
    ['a body without model', JSON.stringify({ ...chat('a'), body: { messages: [{ role: 'user', content: 'x' }] } }), /^file: line 1: body\.model: /],
    ['embeddings without input', JSON.stringify({ custom_id: 'e', method: 'POST', url: '/v1/embeddings', body: { model: 'm' } }), /^file: line 1: body\.input: /],
    ['a streamed line', JSON.stringify({ ...chat('a'), body: { ...chat('a').body, stream: true } }), /^file: line 1: body\.stream: batch lines do not stream/],
    ['an unknown field', JSON.stringify({ ...chat('a'), extra: 1 }), /^file: line 1: unknown field "extra"/],
    ['a blank line inside', `${JSON.stringify(chat('a'))}\n\n${JSON.stringify(chat('b'))}\n`, /^file: line 2: empty line/],
    ['an empty file', '', /^file: empty/],
    ['more lines than allowed', jsonl(Array.from({ length: 51 }, (_, i) => chat(`l${i}`))), /^file: more than 50 lines; a batch input file holds at most 50/],
  ];
  it.each(cases)('refuses %s with a 400 that names the file and the line', async (_name, text, message) => {
    const e = (await upload(text).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e.status).toBe(400);
    expect(e.param).toBe('file');
    expect(e.type).toBe('invalid_request');
    expect((e.error as { message: string; line?: number }).message).toMatch(message);
    if (/line \d/.test(String(message))) expect((e.error as { line?: number }).line).toBe(Number(/line (\d+)/.exec(String(message))![1]));
  });

  it('refuses text that is not UTF-8, and a CRLF file with a trailing newline is fine', async () => {
    const e = (await upload(Buffer.from([0x7b, 0xff, 0xfe, 0x0a])).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect({ status: e.status, param: e.param }).toEqual({ status: 400, param: 'file' });
    expect(e.message).toMatch(/not UTF-8/);
    const ok = await upload([chat('a'), chat('b')].map((l) => JSON.stringify(l)).join('\r\n') + '\r\n');
    expect((await row(ok.id)).lines).toBe(2);
  });

  it('multipart problems are 4xx naming the field; nothing is stored', async () => {
    const before = (await oa.files.list()).data.length;
    const good = jsonl([chat('a')]);
    expect(await rawUpload([{ name: 'purpose', value: 'fine-tune' }, { name: 'file', value: good, filename: 'a.jsonl' }])).toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'purpose' } } });
    expect(await rawUpload([{ name: 'purpose', value: 'batch' }])).toMatchObject({ status: 400, body: { error: { param: 'file', message: expect.stringMatching(/^file: required/) } } });
    expect(await rawUpload([{ name: 'file', value: good, filename: 'a.jsonl' }])).toMatchObject({ status: 400, body: { error: { param: 'purpose' } } });
    expect(await rawUpload([{ name: 'purpose', value: 'batch' }, { name: 'file', value: good }, { name: 'expires_after', value: '1' }])).toMatchObject({ status: 400, body: { error: { param: 'expires_after' } } });
    expect(await rawUpload([{ name: 'purpose', value: 'batch' }, { name: 'purpose', value: 'batch' }, { name: 'file', value: good }])).toMatchObject({ status: 400, body: { error: { param: 'purpose' } } });

    const json = await fetch(`${t.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ purpose: 'batch' }) });
    expect(json.status).toBe(415);
    expect(((await json.json()) as { error: { type: string } }).error.type).toBe('unsupported_media_type');
    const truncated = await fetch(`${t.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=zz' }, body: '--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch' });
    expect(truncated.status).toBe(400);

    // Over the size limit: the file part alone, and a body past the route's limit.
    const big = jsonl(Array.from({ length: 40 }, (_, i) => chat(`b${i}`, 'x'.repeat(200))));
    expect(Buffer.byteLength(big)).toBeGreaterThan(MAX_BYTES);
    const e = (await upload(big).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect({ status: e.status, type: e.type, param: e.param }).toEqual({ status: 413, type: 'payload_too_large', param: 'file' });
    const huge = await rawUpload([{ name: 'purpose', value: 'batch' }, { name: 'file', value: 'y'.repeat(MAX_BYTES + 70_000), filename: 'h.jsonl' }]);
    expect(huge).toMatchObject({ status: 413, body: { error: { type: 'payload_too_large' } } });
    expect((await oa.files.list()).data.length).toBe(before);
  });
});

describe('delete, TTL and isolation', () => {
  it('delete destroys the ciphertext in the same statement; the file is then gone', async () => {
    const f = await upload(jsonl([chat('a')]));
    expect(await oa.files.delete(f.id)).toEqual({ id: f.id, object: 'file', deleted: true });
    expect(await row(f.id)).toMatchObject({ content: null, content_chunks: null, content_destroyed_reason: 'deleted', deleted_at: expect.any(Date) });
    expect(await chunks(f.id)).toEqual([]);
    await expect(oa.files.retrieve(f.id)).rejects.toMatchObject({ status: 404, type: 'not_found' });
    await expect(oa.files.content(f.id)).rejects.toMatchObject({ status: 404 });
    await expect(oa.files.delete(f.id)).rejects.toMatchObject({ status: 404 });
    expect((await oa.files.list()).data.map((x) => x.id)).not.toContain(f.id);
  });

  it('past the hard TTL the content is refused at once (410), the loop nulls the ciphertext, the metadata stays', async () => {
    const s = await t.signIn();
    const c = client((await s.client.createKey()).key);
    const f = await upload(jsonl([chat('a')]), c);
    t.clock.advance(TTL_S * 1000 - 1000);
    expect(await (await c.files.content(f.id)).text()).toContain('"custom_id":"a"');
    t.clock.advance(1000);
    // Refused before the purge loop ran: the TTL is hard.
    const gone = (await c.files.content(f.id).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect(gone.status).toBe(410);
    expect(gone.message).toMatch(/hard TTL passed/);
    expect((await row(f.id)).content_chunks).toBe(1);
    await t.gw.leader.runAllOnce();
    expect(await row(f.id)).toMatchObject({ content: null, content_chunks: null, content_destroyed_reason: 'expired' });
    expect(await chunks(f.id)).toEqual([]);
    expect(await c.files.retrieve(f.id)).toMatchObject({ id: f.id, status_details: expect.stringMatching(/hard TTL passed/) });
    await expect(c.files.content(f.id)).rejects.toMatchObject({ status: 410, type: 'gone' });
  });

  it("another account's file is a 404 everywhere; a key without the files scope is refused", async () => {
    const f = await upload(jsonl([chat('mine')]));
    const s = await t.signIn();
    const other = client((await s.client.createKey()).key);
    await expect(other.files.retrieve(f.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(f.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.delete(f.id)).rejects.toMatchObject({ status: 404 });
    expect((await other.files.list()).data).toEqual([]);
    expect((await row(f.id)).content_chunks).toBe(1); // the foreign delete destroyed nothing
    expect(await chunks(f.id)).toHaveLength(1);

    const narrow = client((await s.client.createKey({ scopes: ['inference'] })).key);
    await expect(narrow.files.list()).rejects.toMatchObject({ status: 403, type: 'insufficient_scope' });
    await expect(upload(jsonl([chat('a')]), narrow)).rejects.toMatchObject({ status: 403 });
  });
});
