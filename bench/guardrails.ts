/**
 * Guardrail cost, against baselines measured in the same run:
 * 1. Detector cost per KB of text (each detector, and a full rule set scanning and redacting) against copying
 *    the same text (UTF-8 encode and decode); mean, p50 and p99 per KB over many 1 KB texts, and the mean on
 *    16 KB texts. Each text is held as a request's is: decoded from bytes and parsed from a JSON body. The
 *    last column is the mean from the process's CPU time over the 1 KB texts (10 ms ticks over 2,000 texts),
 *    which time spent waiting for a core on a busy machine does not inflate. Two kinds of text: lines of the labelled corpus (test/fixtures/guardrails/corpus.tsv),
 *    positives and negatives mixed, so about one line in two holds something to find (the worst case: dense
 *    with digits, tokens and trigger words); and ordinary prose (sentences of a business note) with an email
 *    or phone number in each KB.
 * 2. What a full rule set in enforce mode adds to a chat completion with a 2 KB prompt: a real gateway and a
 *    loopback upstream in this process, calls alternating between a key without a policy and a key whose
 *    policy names the rule set; p50 and p99 of each, and the added p50 as a share of the plain call's.
 *
 *   npx tsx bench/guardrails.ts [--texts 2000] [--rounds 5] [--calls 400]
 */
import { readFileSync } from 'node:fs';
import { arg } from './args.ts';
import { percentile } from './load.ts';
import { compileRuleSets, type DetectorConfig } from '../control-plane/src/modules/guardrails/compile.ts';
import { FindingsLog, scanText } from '../control-plane/src/modules/guardrails/scanner.ts';
import { startTestGateway, fundedKey } from '../test/support/gateway.ts';
import { startUpstream } from '../test/support/upstream.ts';

const TEXTS = Number(arg('texts', '2000'));
const CALLS = Number(arg('calls', '400'));
/** Each detector is timed over all texts this many times, interleaved with the others; the least disturbed round (lowest mean) is reported. */
const ROUNDS = Number(arg('rounds', '5'));

const rows = readFileSync(new URL('../test/fixtures/guardrails/corpus.tsv', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => l.split('\t'))
  .map(([label, format, text]) => ({ label: label!, format: format!, text: text!.replace(/\\n/g, '\n') }));
const lines = rows.map((r) => r.text);
/** Ordinary prose: sentences of a business note (none of the corpus's trick sentences), with one email or phone line in every KB or so. */
const prose = [
  'Thanks for the update on the quarterly planning review.',
  'The supplier confirmed that the shipment left the warehouse on Tuesday morning.',
  'We agreed to move the design workshop to the second week of the month.',
  'Please summarise the attached meeting notes and list the open action items with their owners.',
  'The new onboarding guide covers accounts, laptops, building access and the first week of training.',
  'Sales in the northern region grew faster than expected, mostly from returning customers.',
  'The team will publish the release notes once the last two regressions are fixed.',
  'Remember that the office is closed on Friday for the public holiday.',
  'Budget requests for the next year are due by the end of the month.',
  'The customer asked whether the warranty covers accidental damage to the screen.',
  'Our latency dashboards show a small increase after the database upgrade last night.',
  'Lunch will be served in the main hall after the keynote.',
];
const personal = rows.filter((r) => r.label === 'email' || r.label === 'phone').map((r) => r.text);

/**
 * A text as the gateway holds it: decoded from a request body's bytes and parsed from JSON. (V8 stores an ASCII
 * string parsed that way one byte per character; a string cut from a file read whole, which holds non-ASCII
 * lines, keeps two bytes per character, which makes case conversion several times slower.)
 */
const asReceived = (t: string): string => JSON.parse(Buffer.from(JSON.stringify({ content: t })).toString('utf8')).content;

/** Texts of about `bytes` bytes made of `from`'s lines, starting at different lines (one of `every` in each KB). */
function texts(bytes: number, n: number, from: string[] = lines, every: string[] = []): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let t = '';
    for (let j = (i * 7) % from.length; Buffer.byteLength(t) < bytes; j = (j + 1) % from.length) {
      if (every.length && t.length % 1024 < 120 && t.length > 0) t += `${every[(i + t.length) % every.length]} `;
      t += `${from[j]} `;
    }
    out.push(asReceived(t.slice(0, bytes)));
  }
  return out;
}

const TERMS = ['Project Falcon', 'Bluebird Holdings', 'straße', 'Orion-7', ...Array.from({ length: 46 }, (_, i) => `codename-${i}`)];
const DETECTORS: Record<string, DetectorConfig> = {
  pii: { type: 'pii', input: 'redact' },
  secrets: { type: 'secrets', input: 'redact' },
  prompt_injection: { type: 'prompt_injection', input: 'block' },
  blocklist: { type: 'blocklist', input: 'redact', terms: TERMS, patterns: ['(?i)ticket-[0-9]{4,6}', 'INV-[0-9]{5}-[A-Z]{2}'] },
};
const FULL = Object.values(DETECTORS);

let sink = 0;
/**
 * Nanoseconds per run of `f` over each text: one timing per text (after a warm-up pass); and the process's CPU
 * time over all of them in microseconds (which time spent waiting for a core on a busy machine does not inflate).
 */
function timeEach(ts: string[], f: (t: string) => void): { ns: number[]; cpuUs: number } {
  for (const t of ts.slice(0, 200)) f(t);
  const c0 = process.cpuUsage();
  const ns = ts.map((t) => {
    const s = process.hrtime.bigint();
    f(t);
    return Number(process.hrtime.bigint() - s);
  });
  const c = process.cpuUsage(c0);
  return { ns, cpuUs: c.user + c.system };
}

const copy = (t: string) => {
  sink += Buffer.from(t, 'utf8').toString('utf8').length;
};

function detectorTable(kind: 'corpus' | 'prose'): void {
  const small = kind === 'corpus' ? texts(1024, TEXTS) : texts(1024, TEXTS, prose, personal);
  const large = kind === 'corpus' ? texts(16 * 1024, Math.max(50, TEXTS / 16)) : texts(16 * 1024, Math.max(50, TEXTS / 16), prose, personal);
  const rows: Array<[string, (t: string) => void]> = [['copy (baseline)', copy]];
  for (const [name, d] of Object.entries(DETECTORS)) {
    const plan = compileRuleSets([{ id: 'gr_bench', detectors: [d] }]).input!;
    rows.push([name, (t) => void (sink += plan.scan(t).length)]);
  }
  const full = compileRuleSets([{ id: 'gr_bench', detectors: FULL }]).input!;
  rows.push(['full rule set (scan + redact)', (t) => void (sink += scanText(full, t, 'input', new FindingsLog('enforce')).text.length)]);
  const perKb = (ns: number[], bytes: number) => ns.map((x) => x / 1000 / (bytes / 1024));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  // Rounds interleave the rows, so a burst of load on the machine falls on every row alike.
  const best = new Map<string, { s: number[]; l: number[]; cpu: number }>();
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, f] of rows) {
      const small1 = timeEach(small, f);
      const s = perKb(small1.ns, 1024);
      const l = perKb(timeEach(large, f).ns, 16 * 1024);
      const cpu = small1.cpuUs / small.length; // µs per 1 KB text
      const prev = best.get(name);
      if (!prev || mean(s) < mean(prev.s)) best.set(name, { s, l: prev && mean(prev.l) < mean(l) ? prev.l : l, cpu: Math.min(cpu, prev?.cpu ?? cpu) });
      else prev.cpu = Math.min(prev.cpu, cpu);
    }
  }
  let base = 0;
  const what = kind === 'corpus' ? 'corpus lines (dense: about one finding per line, trick sentences, digits and tokens)' : 'ordinary prose with an email or phone number per KB';
  console.log('\nDetector cost per KB (µs) on %s, 1 KB texts x %d and 16 KB texts x %d, best of %d rounds', what, small.length, large.length, ROUNDS);
  console.log('%s', ['detector'.padEnd(30), '  mean', '   p50', '   p99', ' 16KB mean', ' x copy (mean)', ' mean (CPU time)'].join('  '));
  for (const [name] of rows) {
    const { s, l, cpu } = best.get(name)!;
    const m = mean(s);
    if (!base) base = m;
    console.log('%s', [name.padEnd(30), m.toFixed(2).padStart(6), percentile(s, 50).toFixed(2).padStart(6), percentile(s, 99).toFixed(2).padStart(6), mean(l).toFixed(2).padStart(10), `${(m / base).toFixed(1)}x`.padStart(13), cpu.toFixed(2).padStart(16)].join('  '));
  }
}

async function chatPath(): Promise<void> {
  const up = await startUpstream();
  up.switches.reply = 'Thanks, noted. I will get back to you with the details by Friday.';
  const t = await startTestGateway({
    env: { SVC_GUARDRAILS_MODE: 'enforce', SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: 'test-chat', input_micro_usd_per_mtok: 1, output_micro_usd_per_mtok: 1, max_output_tokens: 1000 }] }]) },
  });
  try {
    const acct = await fundedKey(t, 1_000_000_000);
    const g = await acct.client.request<{ id: string }>('POST', '/v1/guardrails', { body: { detectors: FULL.map((d) => ({ ...d, output: d.type === 'prompt_injection' ? 'allow' : 'redact' })) } });
    const guarded = (await acct.client.request<{ key: string }>('POST', '/v1/keys', { body: { policy: { guardrails: [g.id] } } })).key;
    // A 2 KB prompt of ordinary prose with one address in it (redacted on the way).
    const prose = 'Please summarise the attached meeting notes for the quarterly planning review and list the open action items with their owners. ';
    let prompt = 'Reach me at jane.doe@example.com if anything is unclear. ';
    while (Buffer.byteLength(prompt) < 2048) prompt += prose;
    const body = JSON.stringify({ model: 'test-chat', messages: [{ role: 'user', content: prompt.slice(0, 2048) }], max_tokens: 32 });
    const call = async (key: string) => {
      const s = process.hrtime.bigint();
      const res = await fetch(`${t.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
      return Number(process.hrtime.bigint() - s) / 1e6;
    };
    for (let i = 0; i < 50; i++) await Promise.all([call(acct.key), call(guarded)]);
    const plain: number[] = [];
    const withRules: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      if (i % 2) {
        plain.push(await call(acct.key));
        withRules.push(await call(guarded));
      } else {
        withRules.push(await call(guarded));
        plain.push(await call(acct.key));
      }
    }
    const p50a = percentile(plain, 50);
    const p50b = percentile(withRules, 50);
    console.log('\nChat completion, 2 KB prompt, %d sequential calls each (alternating), full rule set in enforce mode', CALLS);
    console.log('  no policy (baseline): p50 %s ms, p99 %s ms', p50a.toFixed(3), percentile(plain, 99).toFixed(3));
    console.log('  full rule set:        p50 %s ms, p99 %s ms', p50b.toFixed(3), percentile(withRules, 99).toFixed(3));
    console.log('  added p50: %s ms = %s%% of the baseline p50 (target < 20%%)', (p50b - p50a).toFixed(3), (((p50b - p50a) / p50a) * 100).toFixed(1));
    const seen = up.requests.at(-1)!.body.messages[0].content as string;
    console.log('  the upstream saw the address redacted: %s', seen.includes('[REDACTED:email]') && !seen.includes('jane.doe'));
  } finally {
    await t.close();
    await up.close();
  }
}

detectorTable('corpus');
detectorTable('prose');
await chatPath();
if (sink < 0) console.log(sink);
