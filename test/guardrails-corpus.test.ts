import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compileRuleSets } from '../control-plane/src/modules/guardrails/compile.ts';
import { INJECTION_CATEGORIES } from '../control-plane/src/modules/guardrails/injection.ts';

/**
 * Precision and recall of the detectors on the labelled corpus (test/fixtures/guardrails/corpus.tsv, made by
 * generate.ts beside it; sources in its README.md). Each positive line holds one instance of its category;
 * each negative line holds none. A line is predicted to hold every category the full rule set finds in it.
 */
const plan = compileRuleSets([
  {
    id: 'gr_corpus',
    detectors: [
      { type: 'pii', input: 'redact' },
      { type: 'secrets', input: 'redact' },
      { type: 'prompt_injection', input: 'block' },
      { type: 'blocklist', input: 'block', terms: ['Project Falcon', 'Bluebird Holdings', 'straße', 'Orion-7'] },
    ],
  },
]).input!;

const INJECTION = new Set<string>(INJECTION_CATEGORIES);
const labelOf = (category: string) => (INJECTION.has(category) ? 'prompt_injection' : category === 'term' || category === 'pattern' ? 'blocklist' : category);

const lines = readFileSync(new URL('./fixtures/guardrails/corpus.tsv', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [label, format, text] = l.split('\t') as [string, string, string];
    return { label, format, text: text.replace(/\\n/g, '\n') };
  });

describe('detector quality on the labelled corpus', () => {
  it('has at least 500 positive and 500 negative lines', () => {
    expect(lines.filter((l) => l.label !== 'none').length).toBeGreaterThanOrEqual(500);
    expect(lines.filter((l) => l.label === 'none').length).toBeGreaterThanOrEqual(500);
  });

  it('reaches recall >= 0.95 and precision >= 0.90 overall, and >= 0.95 both for cards, IBANs, emails and private keys', () => {
    const stats = new Map<string, { tp: number; fn: number; fp: number }>();
    const stat = (c: string) => stats.get(c) ?? stats.set(c, { tp: 0, fn: 0, fp: 0 }).get(c)!;
    const misses: string[] = [];
    for (const l of lines) {
      const found = new Set(plan.scan(l.text).flatMap((h) => h.parts.map((p) => labelOf(p.category))));
      if (l.label !== 'none') {
        if (found.has(l.label)) stat(l.label).tp++;
        else {
          stat(l.label).fn++;
          misses.push(`missed ${l.label}: ${l.text.slice(0, 90)}`);
        }
      }
      for (const c of found) {
        if (c === l.label) continue;
        stat(c).fp++;
        misses.push(`false ${c} (${l.format}): ${l.text.slice(0, 90)}`);
      }
    }
    const rows = [...stats.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    const total = rows.reduce((s, [, v]) => ({ tp: s.tp + v.tp, fn: s.fn + v.fn, fp: s.fp + v.fp }), { tp: 0, fn: 0, fp: 0 });
    const recall = (v: { tp: number; fn: number }) => (v.tp + v.fn ? v.tp / (v.tp + v.fn) : 1);
    const precision = (v: { tp: number; fp: number }) => (v.tp + v.fp ? v.tp / (v.tp + v.fp) : 1);
    const table = [
      'category               recall  precision   tp  fn  fp',
      ...rows.map(([c, v]) => `${c.padEnd(22)} ${recall(v).toFixed(3).padStart(6)} ${precision(v).toFixed(3).padStart(10)} ${String(v.tp).padStart(4)} ${String(v.fn).padStart(3)} ${String(v.fp).padStart(3)}`),
      `${'overall'.padEnd(22)} ${recall(total).toFixed(3).padStart(6)} ${precision(total).toFixed(3).padStart(10)} ${String(total.tp).padStart(4)} ${String(total.fn).padStart(3)} ${String(total.fp).padStart(3)}`,
    ];
    console.log(`${table.join('\n')}\n${misses.join('\n')}`);
    expect(recall(total)).toBeGreaterThanOrEqual(0.95);
    expect(precision(total)).toBeGreaterThanOrEqual(0.9);
    for (const c of ['payment_card', 'iban', 'email', 'private_key']) {
      const v = stats.get(c)!;
      expect(recall(v), `${c} recall`).toBeGreaterThanOrEqual(0.95);
      expect(precision(v), `${c} precision`).toBeGreaterThanOrEqual(0.95);
    }
  });
});
