/**
 * A video file at its size limit: the time and peak memory of the leader's pass that downloads it from the
 * provider and stores it (sealed, in chunks), then of its download by the caller. The gateway and the
 * provider (test/support/media-upstream.ts) run in this process: the provider's copy of the file is made
 * before the baseline, and both downloads are read as they arrive. Embedded database by default, or the
 * Postgres server with SVC_TEST_DATABASE=postgres.
 *   node --expose-gc --import tsx bench/videos.ts [--mib 250]   (the baseline is taken after a full GC)
 */
import { createHash } from 'node:crypto';
import { startTestGateway } from '../test/support/gateway.ts';
import { startMediaUpstream } from '../test/support/media-upstream.ts';
import { arg } from './args.ts';

const MIB = Number(arg('mib', '250'));
const mb = (x: number) => `${(x / 1048576).toFixed(0)} MB`;

async function main() {
  const media = await startMediaUpstream();
  media.switches.videoBytes = MIB * 1024 * 1024;
  const models = [{ id: 'v', price_micro_usd_per_second: 1, max_seconds: 8, resolutions: ['1280x720'] }];
  const t = await startTestGateway({ env: { SVC_VIDEO_PROVIDERS: JSON.stringify([{ name: 'vids', base_url: media.url, api_key: 'sk', models }]), SVC_MEDIA_TIMEOUT_SECONDS: '300' } });
  try {
    // The provider's file is made first (it takes seconds, and would leave the gateway's idle connection to the
    // provider closed under it): the first job of a fresh provider is video_1.
    const want = createHash('sha256').update(media.content('video_1')).digest('hex');
    const key = (await (await t.signIn()).client.createKey()).key;
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${t.url}/v1/videos/generations`, { method: 'POST', headers, body: JSON.stringify({ model: 'v', prompt: 'a long take', seconds: 4 }) });
    const id = ((await created.json()) as { id: string }).id;
    const upstream = media.lastVideo();
    if (upstream.id !== 'video_1') throw new Error(`the provider named the job ${upstream.id}`);
    media.advance(upstream.id, { status: 'completed', progress: 100 });
    (globalThis as { gc?: () => void }).gc?.();

    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    let t0 = performance.now();
    if (!(await t.gw.leader.runAllOnce())) throw new Error('a leader task failed');
    const stored = performance.now() - t0;
    const storePeak = peak;

    t0 = performance.now();
    const r = await fetch(`${t.url}/v1/videos/generations/${id}/content`, { headers });
    if (r.status !== 200) throw new Error(`download: ${r.status} ${await r.text()}`);
    const h = createHash('sha256');
    for await (const piece of r.body as unknown as AsyncIterable<Uint8Array>) h.update(piece);
    if (h.digest('hex') !== want) throw new Error('the download differs from the provider file');
    const download = performance.now() - t0;
    clearInterval(sampler);

    const db = t.databaseUrl ? 'Postgres server' : 'embedded PGlite';
    console.log(`a ${mb(MIB * 1048576)} video on ${db} (gateway and provider in this process; RSS before: ${mb(base)})`);
    console.log(`  fetched and stored ${stored.toFixed(0).padStart(6)} ms   peak RSS +${mb(storePeak - base)}`);
    console.log(`  downloaded         ${download.toFixed(0).padStart(6)} ms   peak RSS +${mb(peak - base)} (byte for byte)`);
  } finally {
    await t.close();
    await media.close();
  }
}

await main();
