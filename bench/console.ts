/**
 * Console first-load bench: the console opened on localhost in Chromium (Debian's, through playwright-core),
 * signed in, with a cold cache each round, over an account with 14 days of metered calls (two models, two keys,
 * calls on every day, made through the gateway with the stock openai client against a local OpenAI-compatible
 * upstream while the gateway's clock walks back through the days). Per round:
 *   - the bytes transferred for the page: JavaScript and CSS (compressed, as sent), the HTML, the API answers;
 *   - the time from navigation start to the overview drawn: credit figures, the daily chart on its canvas, the
 *     per-model and per-key bars and the latest calls all in the page (the first animation frame with all of them).
 *   npx tsx bench/console.ts [--rounds 7] [--calls-per-day 6]
 * Targets: at most 200 KB of compressed JavaScript and CSS on first load; the overview drawn within 1 s.
 */
import { loadavg } from 'node:os';
import OpenAI from 'openai';
import type { CDPSession } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { launchChromium } from '../test/support/browser.ts';
import { ensureConsoleBuilt, injectWallet } from '../test/support/console.ts';
import { startTestGateway } from '../test/support/gateway.ts';
import { startUpstream } from '../test/support/upstream.ts';
import { arg } from './args.ts';
import { median } from './load.ts';

const ROUNDS = Number(arg('rounds', '7'));
const PER_DAY = Number(arg('calls-per-day', '6'));
const TARGET_BYTES = 200 * 1024;
const TARGET_MS = 1000;
const DAY = 86_400_000;

interface Transfer {
  script: number;
  style: number;
  document: number;
  api: number;
  requests: number;
}

/** Bytes on the wire per resource type, from DevTools' Network domain (encodedDataLength: headers and body as sent). */
async function countTransfers(cdp: CDPSession): Promise<() => Transfer> {
  const types = new Map<string, { type: string; url: string }>();
  const out: Transfer = { script: 0, style: 0, document: 0, api: 0, requests: 0 };
  await cdp.send('Network.enable');
  cdp.on('Network.responseReceived', (e) => types.set(e.requestId, { type: e.type, url: e.response.url }));
  cdp.on('Network.loadingFinished', (e) => {
    const r = types.get(e.requestId);
    if (!r) return;
    out.requests++;
    if (r.type === 'Script') out.script += e.encodedDataLength;
    else if (r.type === 'Stylesheet') out.style += e.encodedDataLength;
    else if (r.type === 'Document') out.document += e.encodedDataLength;
    else if (new URL(r.url).pathname.startsWith('/v1/')) out.api += e.encodedDataLength;
  });
  return () => ({ ...out });
}

async function main() {
  await ensureConsoleBuilt();
  const upstream = await startUpstream();
  const models = ['model-a', 'model-b'];
  const t = await startTestGateway({
    env: { SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: upstream.url, models: models.map((id, i) => ({ id, input_micro_usd_per_mtok: 1_000_000 * (i + 1), output_micro_usd_per_mtok: 3_000_000 * (i + 1) })) }]) },
  });
  const browser = await launchChromium();
  try {
    // The account: signed in through the console once, funded, two keys, 14 days of calls.
    const wallet = privateKeyToAccount(generatePrivateKey());
    const first = await browser.newContext();
    await injectWallet(first, wallet);
    const page = await first.newPage();
    await page.goto(`${t.url}/console`);
    await page.getByRole('button', { name: 'Sign in with a wallet' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    const cookies = await first.cookies();
    const token = cookies.find((c) => c.name === 'svc_session')!.value;
    await first.close();
    const me = (await (await fetch(`${t.url}/v1/auth/me`, { headers: { authorization: `Bearer ${token}` } })).json()) as { account_id: string };
    await t.gw.services.metering.credit(me.account_id, 1e12, 'grant', 'console-bench');
    const keys: string[] = [];
    for (const name of ['web', 'batch']) {
      const res = await fetch(`${t.url}/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
      keys.push(((await res.json()) as { key: string }).key);
    }
    const now = t.clock.now().getTime();
    for (let d = 13; d >= 0; d--) {
      t.clock.set(now - d * DAY);
      for (let i = 0; i < PER_DAY; i++) {
        const openai = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: keys[i % 2]!, maxRetries: 0 });
        await openai.chat.completions.create({ model: models[(i + d) % 2]!, messages: [{ role: 'user', content: `day ${d} call ${i}` }] });
      }
    }
    t.clock.set(now);
    console.log(`console bench: ${14 * PER_DAY} calls over 14 days, ${ROUNDS} cold loads; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);

    const rounds: Array<Transfer & { ms: number; busy: number }> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } }); // a cold cache
      await ctx.addCookies(cookies);
      const p = await ctx.newPage();
      const cdp = await ctx.newCDPSession(p);
      const transfers = await countTransfers(cdp);
      await cdp.send('Performance.enable');
      await p.goto(`${t.url}/console`);
      const drawn = await p.waitForFunction(
        () =>
          (globalThis as any).document.querySelector('[data-figure=balance]') &&
          (globalThis as any).document.querySelector('[data-chart=daily][data-drawn=true] canvas') &&
          (globalThis as any).document.querySelector('[data-chart=model] li') &&
          (globalThis as any).document.querySelector('[data-chart=key] li') &&
          (globalThis as any).document.querySelector('[data-table=latest] tbody tr')
            ? performance.now()
            : false,
        null,
        { polling: 'raf', timeout: 30_000 },
      );
      const ms = (await drawn.jsonValue()) as number;
      const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
      const busy = 1000 * ((metrics.TaskDuration ?? 0) as number);
      await p.waitForLoadState('networkidle');
      rounds.push({ ...transfers(), ms, busy });
      await ctx.close();
    }
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
    const med = (f: (x: Transfer & { ms: number; busy: number }) => number) => median(rounds.map(f));
    const jsCss = med((x) => x.script + x.style);
    const drawnMs = med((x) => x.ms);
    console.log('| figure | median | min | max |');
    console.log('|---|---|---|---|');
    const row = (name: string, f: (x: Transfer & { ms: number; busy: number }) => number, fmt: (n: number) => string) =>
      console.log(`| ${name} | ${fmt(med(f))} | ${fmt(Math.min(...rounds.map(f)))} | ${fmt(Math.max(...rounds.map(f)))} |`);
    row('JavaScript transferred (compressed)', (x) => x.script, kb);
    row('CSS transferred (compressed)', (x) => x.style, kb);
    row('HTML transferred', (x) => x.document, kb);
    row('API answers transferred', (x) => x.api, kb);
    row('requests', (x) => x.requests, String);
    row('overview drawn after navigation start', (x) => x.ms, (n) => `${n.toFixed(0)} ms`);
    row("the page's main thread busy until then (tasks)", (x) => x.busy, (n) => `${n.toFixed(0)} ms`);
    console.log(`target: JavaScript and CSS at most ${kb(TARGET_BYTES)}: ${jsCss <= TARGET_BYTES ? 'met' : 'MISSED'} (${kb(jsCss)})`);
    console.log(`target: overview drawn within ${TARGET_MS} ms: ${drawnMs <= TARGET_MS ? 'met' : 'MISSED'} (${drawnMs.toFixed(0)} ms)`);
  } finally {
    await browser.close();
    await t.close();
    await upstream.close();
  }
}

await main();
