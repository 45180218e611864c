import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BACKEND_TESTS } from '../vitest.config.ts';

/**
 * `npm run test:pg` runs only the files listed in BACKEND_TESTS (vitest.config.ts) on the Postgres server.
 * A file that starts a second control-plane process on one database or branches on the backend checks
 * something only Postgres shows, so it must be listed, or that part never runs.
 */
const BACKEND_MARKS = /\b(TEST_DB_KIND|startGatewayPair|startChildGateway)\b/;

const asRegExp = (glob: string) => new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);

describe('the backend test set', () => {
  it('lists every end-to-end file that depends on the backend', () => {
    const listed = BACKEND_TESTS.map(asRegExp);
    const files = readdirSync(new URL('.', import.meta.url)).filter((f) => f.endsWith('.test.ts') && f !== 'backend-tests.test.ts').map((f) => `test/${f}`);
    const marked = files.filter((f) => BACKEND_MARKS.test(readFileSync(new URL(`../${f}`, import.meta.url), 'utf8')));
    expect(marked.filter((f) => !listed.some((r) => r.test(f)))).toEqual([]);
  });

  it('has no pattern that matches nothing', () => {
    const files = readdirSync(new URL('.', import.meta.url)).map((f) => `test/${f}`);
    expect(BACKEND_TESTS.filter((g) => !files.some((f) => asRegExp(g).test(f)))).toEqual([]);
  });
});
