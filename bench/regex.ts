/**
 * The engine that runs caller-supplied regular expressions (blocklist patterns, eval `regex` assertions, JSON
 * Schema `pattern`s): RE2JS (pure JavaScript, linear time, control-plane/src/linear-regex.ts) against V8's own
 * RegExp (backtracking, the baseline of every row) and, when it is installed (`npm install --no-save re2`), the
 * native RE2 binding it replaced. Each row: operations per second, and the ratio to V8 measured in the same run.
 *
 *   npx tsx bench/regex.ts [--ms 400]
 */
import { createRequire } from 'node:module';
import { linearRegex } from '../control-plane/src/linear-regex.ts';
import { blocklistDetector } from '../control-plane/src/modules/guardrails/blocklist.ts';
import { arg } from './args.ts';

const MS = Number(arg('ms', '400'));

type Engine = { name: string; compile(src: string, flags: string): { test(s: string): boolean; all(s: string): number } };

const v8: Engine = {
  name: 'V8 RegExp',
  compile(src, flags) {
    const re = new RegExp(src.replace(/^\(\?i\)/, ''), `${flags}${src.startsWith('(?i)') ? 'i' : ''}gu`);
    return {
      test: (s) => ((re.lastIndex = 0), re.test(s)),
      all: (s) => [...s.matchAll(re)].length,
    };
  },
};

const re2js: Engine = {
  name: 'RE2JS',
  compile(src, flags) {
    const re = linearRegex(src, flags);
    return { test: (s) => re.test(s), all: (s) => re.matches(s).length };
  },
};

function nativeRe2(): Engine | null {
  try {
    const RE2 = createRequire(import.meta.url)('re2') as new (s: string, f: string) => RegExp;
    return {
      name: 're2 (native)',
      compile(src, flags) {
        const re = new RE2(src, `${flags}g`);
        return {
          test: (s) => ((re.lastIndex = 0), re.test(s)),
          all: (s) => {
            let n = 0;
            re.lastIndex = 0;
            while (re.exec(s)) n++;
            return n;
          },
        };
      },
    };
  } catch {
    return null;
  }
}

/** Operations per second of `fn` over about MS milliseconds (after a warm-up of a quarter of that). */
function rate(fn: () => unknown): number {
  const run = (ms: number) => {
    let n = 0;
    const end = performance.now() + ms;
    const start = performance.now();
    while (performance.now() < end) {
      for (let i = 0; i < 16; i++) fn();
      n += 16;
    }
    return n / ((performance.now() - start) / 1000);
  };
  run(MS / 4);
  return run(MS);
}

const prose = 'The quarterly report covers revenue, churn and the roadmap for the next release. '.repeat(50); // ~4 KB
const withHits = `${prose}ticket TKT-1234 and INV-00042-EU, host 10.0.12.7, project-falcon. `.repeat(2);
const cases: Array<{ what: string; src: string; flags?: string; text: string; op: 'test' | 'all' }> = [
  { what: 'blocklist pattern, 4 KB, no match', src: '(?i)project-[a-z]{3,8}', text: prose, op: 'test' },
  { what: 'blocklist pattern, 8 KB, every match', src: '(?i)project-[a-z]{3,8}', text: withHits, op: 'all' },
  { what: 'IPv4 shape, 8 KB, every match', src: '(\\d{1,3}\\.){3}\\d{1,3}', text: withHits, op: 'all' },
  { what: 'invoice id, 8 KB, every match', src: 'INV-[0-9]{5}-[A-Z]{2}', text: withHits, op: 'all' },
  { what: 'eval regex assertion, 4 KB answer', src: '\\b(revenue|churn)\\b.*roadmap', flags: 's', text: prose, op: 'test' },
  { what: 'schema pattern, a 24-character id', src: '^[a-z0-9][a-z0-9-]{0,62}$', text: 'acme-project-2026-alpha1', op: 'test' },
];

const engines = [v8, re2js, nativeRe2()].filter((e): e is Engine => e !== null);
console.log(`regex engines, ${MS} ms per row; ratio: ops/s over V8 RegExp's in this run (a shared machine: ratios, not absolutes)`);
console.log(`| case | ${engines.map((e) => `${e.name} ops/s`).join(' | ')} | ${engines.slice(1).map((e) => `${e.name} / V8`).join(' | ')} |`);
console.log(`|---|${engines.map(() => '---:').join('|')}|${engines.slice(1).map(() => '---:').join('|')}|`);
for (const c of cases) {
  const rates = engines.map((e) => {
    const re = e.compile(c.src, c.flags ?? '');
    return rate(() => (c.op === 'test' ? re.test(c.text) : re.all(c.text)));
  });
  console.log(`| ${c.what} | ${rates.map((r) => Math.round(r).toLocaleString('en-US')).join(' | ')} | ${rates.slice(1).map((r) => `${(r / rates[0]!).toFixed(2)}x`).join(' | ')} |`);
}

// The product's path: a blocklist rule set (terms and patterns) over a 4 KB text, the literal prefilter first.
const detector = blocklistDetector(['acme corp', 'falcon'], ['(?i)project-[a-z]{3,8}', 'TKT-[0-9]{4}', 'INV-[0-9]{5}-[A-Z]{2}']);
const copy = rate(() => prose.split('').join(''));
const scan = rate(() => detector.find(withHits));
console.log(`\nblocklist detector (2 terms, 3 patterns) over 8 KB: ${Math.round(scan).toLocaleString('en-US')} scans/s; copying the text char by char: ${Math.round(copy).toLocaleString('en-US')}/s (ratio ${(scan / copy).toFixed(2)}x)`);

// What backtracking costs: (a+)+$ on n a's and a '!' (V8 doubles per a; linear engines do not notice).
const evil = '(a+)+$';
for (const n of [20, 22, 24]) {
  const text = `${'a'.repeat(n)}!`;
  const t0 = performance.now();
  new RegExp(evil).test(text);
  const t1 = performance.now();
  linearRegex(evil).test(text);
  const t2 = performance.now();
  console.log(`(a+)+$ on ${n} a's: V8 ${(t1 - t0).toFixed(1)} ms, RE2JS ${(t2 - t1).toFixed(2)} ms`);
}
const long = `${'a'.repeat(100_000)}!`;
const t3 = performance.now();
linearRegex(evil).test(long);
console.log(`(a+)+$ on 100,000 a's: RE2JS ${(performance.now() - t3).toFixed(1)} ms (V8 would take longer than the age of the universe)`);
