import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { ApiKey, NewApiKey } from '@svc/shared/client';
import { expectApiError } from './support/expect-error.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { BIN, WallClock } from './support/cli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// A whole secret, not the short display prefix (sk-svc_ + 7 characters) that key views carry.
const SECRET = /sk-svc_[A-Za-z0-9_-]{20,}/g;
const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let t: TestGateway;
let tmp: string;
let dir: string; // the SVC_CONFIG_DIR most tests share; created by `svc login`
const privateKey = generatePrivateKey();
const account = privateKeyToAccount(privateKey);

beforeAll(async () => {
  // The CLI stamps its SIWE messages with the real time: the gateway's clock runs with it (see WallClock).
  t = await startTestGateway({ clock: new WallClock() });
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-'));
  dir = join(tmp, 'nested', 'svc');
});
afterAll(async () => {
  await t?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Runs the real CLI (the built one, as installed) in a child process against the test gateway. */
function svc(args: string[], opts: { dir?: string; env?: Record<string, string>; url?: boolean } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_CONFIG_DIR: opts.dir ?? dir, ...opts.env };
  delete env.SVC_WALLET_KEY;
  delete env.SVC_URL;
  if (opts.env?.SVC_WALLET_KEY) env.SVC_WALLET_KEY = opts.env.SVC_WALLET_KEY;
  if (opts.env?.SVC_CONFIG_DIR === '') delete env.SVC_CONFIG_DIR;
  const argv = [BIN, ...(opts.url === false ? [] : ['--url', t.url]), ...args];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { cwd: ROOT, env, timeout: 25_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

function keyFile(name: string, content: string): string {
  const p = join(tmp, name);
  writeFileSync(p, content, { mode: 0o600 });
  return p;
}

const sessionFile = () => join(dir, 'sessions.json');
const savedSession = () => (JSON.parse(readFileSync(sessionFile(), 'utf8')) as { sessions: Record<string, Record<string, string>> }).sessions[t.url]!;
const mode = (p: string) => statSync(p).mode & 0o777;
const sessionClient = () => t.client.withCredential({ kind: 'session', token: savedSession().token! });

describe('svc CLI', () => {
  it('refuses a malformed or missing wallet key with a usage error that never echoes the file', async () => {
    const junk = '0x' + 'zz'.repeat(32);
    const bad = await svc(['login', '--key-file', keyFile('bad.key', `  ${junk}\n`)]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: key file .*bad\.key does not hold a wallet private key/m);
    expect(bad.stderr + bad.stdout).not.toContain(junk);

    const short = await svc(['login', '--key-file', keyFile('short.key', privateKey.slice(0, -2))]);
    expect(short.code).toBe(2);
    expect(short.stderr + short.stdout).not.toContain(privateKey.slice(2, 40));

    const missing = await svc(['login', '--key-file', join(tmp, 'nope.key')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read key file .*nope\.key: no such file or directory;/);
    expect(missing.stderr).not.toMatch(/ENOENT/);

    const none = await svc(['login']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no wallet key given/);
    expect(none.stderr).toMatch(/--key-file/);

    expect(existsSync(dir)).toBe(false);
  });

  it('tells you to log in when a command needs a session and there is none', async () => {
    const r = await svc(['keys', 'list']);
    expect(r.code).toBe(4); // authentication needed
    expect(r.stderr).toMatch(/not signed in to http:\/\/127\.0\.0\.1:\d+/);
    expect(r.stderr).toContain('svc login');
    expect(r.stdout).toBe('');
  });

  it('says the clocks differ when the gateway refuses the sign-in as issued in the future', async () => {
    t.clock.advance(-2 * 60_000); // the gateway's clock two minutes behind this machine's
    try {
      const r = await svc(['login', '--key-file', keyFile('early.key', privateKey)]);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 4, stdout: '' });
      expect(r.stderr.trim()).toBe("error: invalid_siwe: message Issued At is in the future; this machine's clock and the gateway's differ by more than a minute: set the clock (NTP) and sign in again");
      expect(existsSync(sessionFile())).toBe(false);
    } finally {
      t.clock.advance(2 * 60_000);
    }
  });

  it('logs in with a key file, saving a 0600 session of a real account and never printing the key', async () => {
    const r = await svc(['login', '--key-file', keyFile('wallet.key', `\n  ${privateKey}  \n\n`)]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(privateKey.slice(2));
    expect(mode(dir)).toBe(0o700);
    expect(mode(sessionFile())).toBe(0o600);

    const s = savedSession();
    expect(Object.keys(s).sort()).toEqual(['account_id', 'expires_at', 'token', 'url', 'wallet_address']);
    expect(s.url).toBe(t.url);
    expect(s.wallet_address).toBe(account.address);
    expect(Date.parse(s.expires_at!)).toBeGreaterThan(Date.now());
    expect(r.stdout).toContain(s.account_id);
    expect(r.stdout).not.toContain(s.token);

    expect(await sessionClient().me()).toEqual({ account_id: s.account_id, wallet_address: account.address });
    // The account is the wallet's: signing in again through the API lands on it.
    expect((await t.signIn(account)).accountId).toBe(s.account_id);
  });

  it('logs in from SVC_WALLET_KEY under XDG_CONFIG_HOME, tightening an existing session file to 0600', async () => {
    const xdg = join(tmp, 'xdg');
    mkdirSync(join(xdg, 'svc'), { recursive: true });
    const file = join(xdg, 'svc', 'sessions.json');
    writeFileSync(file, '{"stale":true}', { mode: 0o644 });
    expect(mode(file)).toBe(0o644);
    const other = generatePrivateKey();
    const r = await svc(['login', '--json'], { env: { SVC_CONFIG_DIR: '', XDG_CONFIG_HOME: xdg, SVC_WALLET_KEY: other } });
    expect(r.code, r.stderr).toBe(0);
    expect(mode(file)).toBe(0o600);
    const out = JSON.parse(r.stdout) as { account_id: string; wallet_address: string; created_account: boolean };
    expect(out).toMatchObject({ wallet_address: privateKeyToAccount(other).address, created_account: true });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ default: t.url, sessions: { [t.url]: { account_id: out.account_id, url: t.url } } });
    expect(r.stdout).not.toContain(other.slice(2));
  });

  let created: NewApiKey;
  it('creates a key, printing its secret exactly once, and lists it without the secret', async () => {
    const human = await svc(['keys', 'create', '--name', 'ci', '--scope', 'inference', '--scope', 'files', '--spend-cap', '5000000']);
    expect(human.code).toBe(0);
    expect(human.stdout.match(SECRET)).toHaveLength(1);
    expect(human.stdout).toMatch(/shown once/i);

    const r = await svc(['keys', 'create', '--json', '--name', 'delegator']);
    expect(r.code).toBe(0);
    created = JSON.parse(r.stdout) as NewApiKey;
    expect(created.key).toMatch(/^sk-svc_/);
    expect(r.stdout.match(SECRET)).toEqual([created.key]);
    expect(occurrences(r.stdout, created.key)).toBe(1);
    // The printed secret is real: it authenticates as the key.
    const child = await t.client.withCredential({ kind: 'key', token: created.key }).delegateKey({ name: 'child' });
    expect(child.parent_id).toBe(created.id);

    const list = await svc(['keys', 'list', '--json']);
    expect(list.code).toBe(0);
    expect(list.stdout).not.toMatch(SECRET);
    expect(list.stdout).not.toContain(created.key);
    const keys = JSON.parse(list.stdout) as (ApiKey & { key?: string })[];
    const mine = keys.find((k) => k.id === created.id);
    expect(mine).toMatchObject({ name: 'delegator', status: 'active' });
    expect(mine).not.toHaveProperty('key');
    expect(keys.find((k) => k.name === 'ci')).toMatchObject({ scopes: ['inference', 'files'], spend_cap_micro_usd: 5_000_000 });
    expect(keys.map((k) => k.id).sort()).toEqual((await sessionClient().listKeys()).map((k) => k.id).sort());

    const table = await svc(['keys', 'list']);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+PREFIX\s+STATUS\s+SCOPES\s+SPENT\s+SUBTREE SPENT$/);
    expect(table.stdout).toMatch(new RegExp(`^${created.id}\\s+delegator\\s+${created.prefix}\\s+active\\s+all\\s+\\$0\\.00\\s+\\$0\\.00$`, 'm'));
    expect(table.stdout).toMatch(/inference,files/);
  });

  it('writes the secret to a new 0600 file with --secret-file, printing it nowhere, never over an existing file', async () => {
    const path = join(tmp, 'filed.key');
    const r = await svc(['keys', 'create', '--name', 'filed', '--secret-file', path, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const secret = readFileSync(path, 'utf8').trim();
    expect(secret).toMatch(/^sk-svc_/);
    expect(mode(path)).toBe(0o600);
    expect(r.stdout + r.stderr).not.toMatch(SECRET);
    expect(JSON.parse(r.stdout)).toMatchObject({ name: 'filed', secret_file: path });
    expect(JSON.parse(r.stdout)).not.toHaveProperty('key');
    // The file's secret is the key's: it authenticates as it.
    expect((await t.client.withCredential({ kind: 'key', token: secret }).delegateKey({ name: 'from-file' })).parent_id).toBe(JSON.parse(r.stdout).id);

    const again = await svc(['keys', 'create', '--name', 'again', '--secret-file', path]);
    expect({ code: again.code, stdout: again.stdout }).toEqual({ code: 2, stdout: '' });
    expect(again.stderr).toMatch(/^error: .*filed\.key already exists; the secret file is never overwritten/m);
    expect(readFileSync(path, 'utf8').trim()).toBe(secret);
    expect((await sessionClient().listKeys()).map((k) => k.name)).not.toContain('again'); // refused before a key was minted
  });

  it('refuses bad option values as usage errors without calling the gateway', async () => {
    const before = (await sessionClient().listKeys()).length;
    for (const args of [['--scope', 'root'], ['--spend-cap', '-5'], ['--spend-cap', '1.5'], ['--expires-at', 'tomorrow'], ['--expires-at', '2030-02-30T00:00:00Z']]) {
      const r = await svc(['keys', 'create', ...args]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stdout).not.toMatch(SECRET);
    }
    expect((await sessionClient().listKeys()).length).toBe(before);
  });

  let rotatedId: string;
  it('rotates a key to a new id, the old one expiring through the grace window', async () => {
    const r = await svc(['keys', 'rotate', created.id, '--grace', '60', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as NewApiKey & { replaces: { id: string; status: string } };
    expect(out.id).not.toBe(created.id);
    expect(out.key).toMatch(/^sk-svc_/);
    expect(out.key).not.toBe(created.key);
    expect(r.stdout.match(SECRET)).toEqual([out.key]);
    expect(occurrences(r.stdout, out.key)).toBe(1);
    expect(out.replaces).toMatchObject({ id: created.id, status: 'expiring' });
    rotatedId = out.id;
    const keys = await sessionClient().listKeys();
    expect(keys.find((k) => k.id === created.id)?.rotated_to).toBe(rotatedId);
    expect(keys.find((k) => k.id === rotatedId)?.status).toBe('active');
  });

  it('revokes a key, and reports an API error as `error: <type>: <message>`', async () => {
    const r = await svc(['keys', 'revoke', rotatedId]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Revoked ${rotatedId}`);
    const list = JSON.parse((await svc(['keys', 'list', '--json'])).stdout) as ApiKey[];
    expect(list.find((k) => k.id === rotatedId)?.status).toBe('revoked');
    // The rotated-out key's secret acts as its replacement during the grace window, so it goes with it.
    expect(list.find((k) => k.id === created.id)?.status).toBe('revoked');

    const missing = await svc(['keys', 'revoke', 'key_doesnotexist']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: not_found: API key not found$/m);
  });

  it('shows the gateway status and who is signed in', async () => {
    const s = savedSession();
    const human = await svc(['status']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^status\s+ok$/m);
    expect(human.stdout).toMatch(new RegExp(`^signed in\\s+yes, as ${s.account_id} \\(wallet ${account.address}\\)`, 'm'));

    const json = JSON.parse((await svc(['status', '--json'])).stdout) as { url: string; gateway: { status: string }; session: Record<string, unknown> };
    expect(json).toMatchObject({ url: t.url, gateway: { status: 'ok' }, session: { signed_in: true, account_id: s.account_id } });

    const anon = await svc(['status', '--json'], { dir: join(tmp, 'empty') });
    expect(anon.code).toBe(0);
    expect(JSON.parse(anon.stdout)).toMatchObject({ gateway: { status: 'ok' }, session: { signed_in: false } });
  });

  it('uses the saved gateway when --url is omitted, and only sends the token to it', async () => {
    const r = await svc(['status', '--json'], { url: false });
    expect(JSON.parse(r.stdout)).toMatchObject({ url: t.url, session: { signed_in: true } });
    const elsewhere = await svc(['--url', 'http://127.0.0.1:9', 'keys', 'list'], { url: false });
    expect(elsewhere.code).toBe(4); // authentication needed
    expect(elsewhere.stderr).toMatch(new RegExp(`not signed in to http://127\\.0\\.0\\.1:9 \\(signed in to ${t.url.replace(/\./g, '\\.')}\\)`));
  });

  it('logs out: the session is revoked on the gateway and sessions.json is deleted', async () => {
    const client = sessionClient();
    const r = await svc(['logout']);
    expect(r.code).toBe(0);
    expect(existsSync(sessionFile())).toBe(false);
    await expectApiError(client.me(), 401, 'invalid_credential');
    const after = await svc(['keys', 'list']);
    expect(after.code).toBe(4); // authentication needed
    expect(after.stderr).toContain('svc login');
  });
});
