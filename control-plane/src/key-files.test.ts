import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { isPrivateKey } from '@svc/shared';
import { fsOps, sealKey, signerKey } from './key-files.ts';

const dirs: string[] = [];
const fresh = () => {
  const d = mkdtempSync(join(tmpdir(), 'svc-keys-'));
  dirs.push(d);
  return join(d, 'data');
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const MODULE = JSON.stringify(fileURLToPath(new URL('./key-files.ts', import.meta.url)));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Starts a process that says `ready` once loaded, waits for `go` (a file), then loads or creates both keys
 * and prints them.
 */
function racer(dir: string, go: string): { ready: Promise<void>; keys: Promise<string> } {
  const script = `
    import { existsSync } from 'node:fs';
    const { signerKey, sealKey } = await import(${MODULE});
    process.stderr.write('ready\\n');
    while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 1));
    const signer = signerKey(undefined, ${JSON.stringify(dir)});
    const seal = Buffer.from(sealKey(undefined, ${JSON.stringify(dir)})).toString('hex');
    process.stdout.write(JSON.stringify({ signer, seal }));`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  const ready = new Promise<void>((resolve) => {
    child.stderr.on('data', (d) => {
      err += d;
      if (err.includes('ready\n')) resolve();
    });
  });
  const keys = new Promise<string>((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`racer exited ${code}: ${err}`)))));
  return { ready: Promise.race([ready, keys.then(() => undefined)]), keys };
}

describe('key files', () => {
  it('generates a key once and reads it back; files are 0600 and no temporary file stays', () => {
    const dir = fresh();
    const a = signerKey(undefined, dir);
    expect(isPrivateKey(a)).toBe(true);
    expect(signerKey(undefined, dir)).toBe(a);
    expect(Buffer.from(sealKey(undefined, dir))).toEqual(Buffer.from(sealKey(undefined, dir)));
    expect(readdirSync(dir).sort()).toEqual(['seal.key', 'signer.key']);
    expect(statSync(join(dir, 'signer.key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'seal.key')).mode & 0o777).toBe(0o600);
  });

  it('a configured key wins; a file that holds no key is refused with its path (after waiting for a writer)', () => {
    const dir = fresh();
    const configured = signerKey(undefined, fresh());
    expect(signerKey(configured, dir)).toBe(configured);
    expect(() => signerKey('0x1234' as `0x${string}`, dir)).toThrow(/SVC_SIGNER_KEY/);
    signerKey(undefined, dir);
    writeFileSync(join(dir, 'signer.key'), 'not a key\n');
    expect(() => signerKey(undefined, dir)).toThrow(/signer\.key does not hold a valid key; restore it from a backup, or remove it/);
    sealKey(undefined, dir);
    writeFileSync(join(dir, 'seal.key'), '\n');
    expect(() => sealKey(undefined, dir)).toThrow(/seal\.key does not hold a valid key; restore it from a backup: content sealed under it/);
  });

  it('on a filesystem without hard links the key is created in place', () => {
    const dir = fresh();
    const link = fsOps.link;
    fsOps.link = () => {
      throw Object.assign(new Error('operation not permitted, link'), { code: 'EPERM' });
    };
    try {
      const a = signerKey(undefined, dir);
      expect(signerKey(undefined, dir)).toBe(a);
      expect(readdirSync(dir)).toEqual(['signer.key']);
      expect(statSync(join(dir, 'signer.key')).mode & 0o777).toBe(0o600);
    } finally {
      fsOps.link = link;
    }
  });

  it('temporary key files left long ago are removed; recent ones (another process creating a key) stay', () => {
    const dir = fresh();
    mkdirSync(dir, { recursive: true });
    const stale = 'signer.key.1-0a1b2c.tmp';
    const recent = 'signer.key.1-3d4e5f.tmp';
    for (const f of [stale, recent]) writeFileSync(join(dir, f), 'key material\n');
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(join(dir, stale), hourAgo, hourAgo);
    signerKey(undefined, dir);
    expect(readdirSync(dir).sort()).toEqual(['signer.key', recent].sort());
  });

  it('processes starting together on a fresh data dir all get the same keys', async () => {
    const dir = fresh();
    const go = join(dir, '..', 'go');
    const racers = Array.from({ length: 6 }, () => racer(dir, go));
    await Promise.all(racers.map((r) => r.ready)); // all loaded and waiting at the line
    writeFileSync(go, '');
    const answers = (await Promise.all(racers.map((r) => r.keys))).map((s) => JSON.parse(s) as { signer: string; seal: string });
    expect(new Set(answers.map((a) => a.signer)).size).toBe(1);
    expect(new Set(answers.map((a) => a.seal)).size).toBe(1);
    expect(readdirSync(dir).sort()).toEqual(['seal.key', 'signer.key']);
  });
});
