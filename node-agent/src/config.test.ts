import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readKeyFile } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-node-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text, { mode: 0o600 });
  return p;
};

describe('readKeyFile (enroll --key-file)', () => {
  it('reads the one line of the file, trimmed', () => {
    const key = `nk-svc_${'A1_-'.repeat(10)}abc`;
    expect(readKeyFile(file('ok.key', `  ${key}\n\n`))).toBe(key);
  });

  it('refuses a file that does not hold a node key, without echoing its content', () => {
    const secret = 'sess_not-a-node-key-but-secret';
    let message = '';
    try {
      readKeyFile(file('bad.key', `${secret}\n`));
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/does not hold a node key/);
    expect(message).not.toContain(secret);
    expect(() => readKeyFile(join(dir, 'missing.key'))).toThrow(/cannot read the key file/);
  });
});
