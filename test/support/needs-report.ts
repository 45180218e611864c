import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import type { Missing } from './needs.ts';

/**
 * The suite's global setup (vitest.config.ts): gives the test files a directory to record the tests they
 * skipped for a need the machine does not meet (test/support/needs.ts), and at the end of the run prints one
 * line naming them and how to enable them. Under CI a missing need fails its file instead.
 */
export default function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-needs-'));
  project.provide('needsSkippedDir', dir);
  return () => {
    const line = summary(readSkips(dir));
    rmSync(dir, { recursive: true, force: true });
    if (line) console.log(`\n${line}\n`);
  };
}

type Skip = Missing & { file: string; what: string | null };

function readSkips(dir: string): Skip[] {
  const out: Skip[] = [];
  for (const f of readdirSync(dir)) {
    for (const l of readFileSync(join(dir, f), 'utf8').split('\n')) if (l) out.push(JSON.parse(l) as Skip);
  }
  return out;
}

/** One line: per need, what was skipped for it and how to enable it. Empty when nothing was skipped. */
export function summary(skips: Skip[]): string {
  const byNeed = new Map<string, Skip[]>();
  for (const s of skips) byNeed.set(s.need, [...(byNeed.get(s.need) ?? []), s]);
  if (!byNeed.size) return '';
  const parts = [...byNeed.values()].map((ss) => {
    const files = [...new Set(ss.map((s) => (s.what ? `${s.file} (${s.what})` : s.file)))].sort();
    const names = files.map((f) => f.replace(/^.*\//, '')).join(', ');
    return `${files.length} test file${files.length === 1 ? ' needs' : 's need'} ${ss[0]!.need}, ${ss[0]!.why} [${names}]; to run them: ${ss[0]!.enable}`;
  });
  return `SKIPPED: ${parts.join(' | ')}. Under CI=true a missing need fails the run.`;
}
