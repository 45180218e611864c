/**
 * Batch file uploads and downloads at the size limit: time and peak memory of the gateway's process (the
 * gateway runs in this process, so its RSS is this process's), on the embedded database by default or on
 * the Postgres server with SVC_TEST_DATABASE=postgres. Baseline: the RSS before the first upload (the test
 * file is already in memory, and is sent from there as it is, without a copy).
 *   npx tsx bench/uploads.ts [--mib 97] [--concurrent 1]
 *   SVC_TEST_DATABASE=postgres npx tsx bench/uploads.ts
 */
import { createHash } from 'node:crypto';
import { startTestGateway } from '../test/support/gateway.ts';
import { arg } from './args.ts';

const MIB = Number(arg('mib', '97'));
const CONCURRENT = Number(arg('concurrent', '1'));
const mb = (x: number) => `${(x / 1048576).toFixed(0)} MB`;

/** A batch input of about `mib` MiB: chat lines of 2,100 letters each (under the 50,000-line limit). */
function input(mib: number): Buffer {
  const filler = 'x'.repeat(2100);
  const lines: string[] = [];
  for (let i = 0, size = 0; size < mib * 1024 * 1024; i++) {
    const l = JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: filler }] } });
    lines.push(l);
    size += l.length + 1;
  }
  return Buffer.from(`${lines.join('\n')}\n`);
}

/** The body sent as views of 64 KiB of it (fetch copies a whole Buffer body first: that would count here too). */
function pieces(b: Buffer): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= b.length) return c.close();
      c.enqueue(new Uint8Array(b.buffer, b.byteOffset + at, Math.min(65536, b.length - at)));
      at += 65536;
    },
  });
}

async function main() {
  const t = await startTestGateway({});
  try {
    const key = (await (await t.signIn()).client.createKey()).key;
    const text = input(MIB);
    const boundary = 'b0undary';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n\r\n`),
      text,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const headers = { authorization: `Bearer ${key}` };

    let t0 = performance.now();
    const ids = await Promise.all(
      Array.from({ length: CONCURRENT }, async () => {
        const init = { method: 'POST', headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` }, body: pieces(body), duplex: 'half' };
        const r = await fetch(`${t.url}/v1/files`, init as RequestInit);
        const j = (await r.json()) as { id?: string };
        if (r.status !== 200 || !j.id) throw new Error(`upload: ${r.status} ${JSON.stringify(j).slice(0, 300)}`);
        return j.id;
      }),
    );
    const upload = performance.now() - t0;
    const uploadPeak = peak;

    t0 = performance.now();
    const want = createHash('sha256').update(text).digest('hex');
    for (const id of ids) {
      const r = await fetch(`${t.url}/v1/files/${id}/content`, { headers });
      const h = createHash('sha256');
      for await (const piece of r.body as unknown as AsyncIterable<Uint8Array>) h.update(piece); // as it arrives: the client keeps no copy
      const got = h.digest('hex');
      if (got !== want) throw new Error(`download of ${id} differs`);
    }
    const download = performance.now() - t0;
    clearInterval(sampler);

    const db = t.databaseUrl ? 'Postgres server' : 'embedded PGlite';
    console.log(`${CONCURRENT} upload(s) of ${mb(text.length)} on ${db} (gateway in this process; RSS before: ${mb(base)})`);
    console.log(`  upload   ${upload.toFixed(0).padStart(6)} ms   peak RSS +${mb(uploadPeak - base)}`);
    console.log(`  download ${download.toFixed(0).padStart(6)} ms   peak RSS +${mb(peak - base)} (one after the other, byte for byte)`);
  } finally {
    await t.close();
  }
}

await main();
