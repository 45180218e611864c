import { execFileSync, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { WallClock, expectOneLineError, savedSession, secretFile, svc as runSvc, svcTty, type CliRun } from './support/cli.ts';

/**
 * The `svc` command's manners, run as the real CLI (a child process, or under a pty where a terminal matters)
 * against real gateways: wallet key kept in the config directory, a session per gateway, streamed refusals
 * with the exit codes of plain ones, chat usage, help that shows the inherited options within the terminal's
 * width, completion scripts, `svc api`, colour, contradictory options, messages without errno codes, and a
 * URL that answers but is not a gateway. Billing is enforced on gateway A, so an account without credit gets
 * the 402 with its payment terms.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODEL = 'test-chat';
let up: TestUpstream;
let a: TestGateway;
let b: TestGateway;
let tmp: string;
let other: Server;
let otherUrl: string;

beforeAll(async () => {
  up = await startUpstream();
  [a, b] = await Promise.all([
    startTestGateway({ clock: new WallClock(), env: { ...ENFORCED_BILLING, SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: MODEL, input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 1_000_000 }] }]) } }),
    startTestGateway({ clock: new WallClock() }),
  ]);
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-manners-'));
  // A web server that is not a gateway: HTML for every path.
  other = createServer((req, res) => {
    res.writeHead(req.url === '/v1/status' ? 200 : 404, { 'content-type': 'text/html' });
    res.end('<html><body>hello</body></html>');
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
}, 120_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await up?.close();
  await new Promise((r) => other?.close(r));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[], opts: { dir: string; url?: string; env?: Record<string, string>; input?: string }): Promise<CliRun> => runSvc(args, opts);
const dirOf = (name: string) => join(tmp, name);

/** A config directory signed in to gateway `g` with a new wallet created by `svc wallet create`, and an API key. */
async function account(name: string, g: TestGateway, credit = 0): Promise<{ dir: string; key: string; accountId: string }> {
  const dir = dirOf(name);
  expect((await svc(['wallet', 'create'], { dir })).code).toBe(0);
  const login = await svc(['login'], { dir, url: g.url });
  expect(login.code, login.stderr).toBe(0);
  const accountId = savedSession(dir, g.url).account_id;
  if (credit) await g.gw.services.metering.credit(accountId, credit, 'grant', `cli-manners-${name}`);
  const created = await svc(['keys', 'create', '--json', '--name', name], { dir, url: g.url });
  expect(created.code, created.stderr).toBe(0);
  return { dir, key: (JSON.parse(created.stdout) as { key: string }).key, accountId };
}

describe('4. secret files and the wallet key', () => {
  it('the secret files the docs create are ignored by git', () => {
    const paths = ['wallet.key', 'node.key', 'admin.token', 'installers/control-plane/gateway.env'];
    const r = spawnSync('git', ['check-ignore', ...paths], { cwd: ROOT, encoding: 'utf8' });
    expect(r.stdout.trim().split('\n')).toEqual(paths);
  });

  it('`svc wallet create` keeps a new key in the config directory (0600), never overwrites it, and `svc login` uses it by default', async () => {
    const dir = dirOf('wallet');
    const created = await svc(['wallet', 'create', '--json'], { dir });
    expect(created.code, created.stderr).toBe(0);
    const { address, key_file } = JSON.parse(created.stdout) as { address: string; key_file: string };
    expect(key_file).toBe(join(dir, 'wallet.key'));
    expect(statSync(key_file).mode & 0o777).toBe(0o600);
    expect(privateKeyToAccount(readFileSync(key_file, 'utf8').trim() as `0x${string}`).address).toBe(address);
    expect(created.stdout).not.toContain(readFileSync(key_file, 'utf8').trim().slice(2));

    expectOneLineError(await svc(['wallet', 'create'], { dir }), 2, new RegExp(`already holds a wallet key \\(address ${address}\\)`));
    const login = await svc(['login', '--json'], { dir, url: a.url });
    expect(login.code, login.stderr).toBe(0);
    expect(JSON.parse(login.stdout)).toMatchObject({ wallet_address: address });

    expectOneLineError(await svc(['login'], { dir: dirOf('no-wallet'), url: a.url }), 2, /no wallet key given, and none at \S+wallet\.key; create one with `svc wallet create`/);
  });
});

describe('6. streamed refusals exit as plain ones', () => {
  it('`svc run` exits 5 with the payment terms on insufficient_credit, and 5 on spend_cap_reached', async () => {
    const broke = await account('broke', a);
    const r = await svc(['run', '-c', 'true'], { dir: broke.dir, url: a.url, env: { SVC_KEY: broke.key } });
    expectOneLineError(r, 5, /^error: insufficient_credit: .*; send at least \S+ USDT .* then run `svc deposit/);

    const capped = await account('capped', a, 10_000_000);
    const { key } = await a.client.withCredential({ kind: 'session', token: savedSession(capped.dir, a.url).token }).createKey({ spend_cap_micro_usd: 1 });
    const c = await svc(['run', '-c', 'true'], { dir: capped.dir, url: a.url, env: { SVC_KEY: key } });
    expectOneLineError(c, 5, /^error: spend_cap_reached: .*; raise the key's cap/);
  });
});

describe('7. chat usage', () => {
  it('`svc chat --json` reports the metered usage', async () => {
    const funded = await account('funded', a, 10_000_000);
    const r = await svc(['chat', '--json', 'Hello there'], { dir: funded.dir, url: a.url, env: { SVC_KEY: funded.key } });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { usage: { prompt_tokens: number; completion_tokens: number } | null; receipt: { id: string } };
    expect(out.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });
    expect(out.usage!.completion_tokens).toBeGreaterThan(0);
    expect(up.requests.at(-1)?.body.stream_options).toEqual({ include_usage: true });
  });
});

describe('8. help', () => {
  it('shows the inherited options under a subcommand, and no line is wider than the terminal', async () => {
    const dir = dirOf('help');
    const chat = await svcTty(['chat', '--help'], { dir, cols: 80 });
    expect(chat.code).toBe(0);
    expect(chat.screen).toMatch(/Global Options:[\s\S]*--url <origin>[\s\S]*--json[\s\S]*--api-key-file <path>/);
    for (const [cmd, cols] of [[['sandbox', '--help'], 80], [['sandbox', 'exec', '--help'], 80], [['run', '--help'], 80], [['receipts', 'verify', '--help'], 80], [['--help'], 80], [['sandbox', '--help'], 60], [['api', '--help'], 72]] as const) {
      const r = await svcTty([...cmd], { dir, cols });
      expect(r.code).toBe(0);
      const wide = r.screen.split(/\r?\n/).filter((l) => l.length > cols);
      expect({ cmd, cols, wide }).toEqual({ cmd, cols, wide: [] });
    }
  });
});

describe('9. a session per gateway', () => {
  it('keeps A when signing in to B, lists both, and `svc logout` revokes on the gateway it leaves', async () => {
    const dir = dirOf('two');
    expect((await svc(['wallet', 'create'], { dir })).code).toBe(0);
    expect((await svc(['login'], { dir, url: a.url })).code).toBe(0);
    const login = await svc(['login', '--json'], { dir, url: b.url });
    expect(login.code, login.stderr).toBe(0);
    expect(JSON.parse(login.stdout)).toMatchObject({ url: b.url, other_sessions: [a.url] });
    const tokenA = savedSession(dir, a.url).token;
    expect(await a.client.withCredential({ kind: 'session', token: tokenA }).me()).toMatchObject({ account_id: savedSession(dir, a.url).account_id });

    const status = await svc(['auth', 'status', '--json'], { dir });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      default: b.url,
      sessions: expect.arrayContaining([expect.objectContaining({ url: a.url, state: 'valid', default: false }), expect.objectContaining({ url: b.url, state: 'valid', default: true })]),
    });
    // Without --url a command goes to the default gateway (B, signed in to last); A is still reachable by --url.
    expect(JSON.parse((await svc(['status', '--json'], { dir })).stdout)).toMatchObject({ url: b.url, session: { signed_in: true } });
    expect(JSON.parse((await svc(['status', '--json'], { dir, url: a.url })).stdout)).toMatchObject({ url: a.url, session: { signed_in: true } });

    const out = await svc(['logout'], { dir, url: a.url });
    expect(out.code, out.stderr).toBe(0);
    await expect(a.client.withCredential({ kind: 'session', token: tokenA }).me()).rejects.toMatchObject({ status: 401 });
    expect(() => savedSession(dir, a.url)).toThrow();
    expect(savedSession(dir, b.url).url).toBe(b.url);
    const table = await svc(['auth', 'status'], { dir });
    expect(table.stdout).toMatch(new RegExp(`^${b.url.replace(/\./g, '\\.')} \\(default\\)\\s+acct_\\S+\\s+0x[0-9a-fA-F]{40}\\s+\\S+\\s+valid$`, 'm'));
    expect(table.stdout).not.toContain(a.url);
  });

  it('moves an earlier single-session file into sessions.json', async () => {
    const dir = dirOf('legacy');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const s = await a.signIn();
    const old = { url: a.url, token: s.token, account_id: s.accountId, wallet_address: s.account.address, expires_at: new Date(Date.now() + 86_400_000).toISOString() };
    writeFileSync(join(dir, 'session.json'), JSON.stringify(old), { mode: 0o600 });
    const r = await svc(['auth', 'status', '--json'], { dir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ default: a.url, sessions: [{ url: a.url, account_id: s.accountId, state: 'valid' }] });
    expect(existsSync(join(dir, 'session.json'))).toBe(false);
    expect(savedSession(dir)).toEqual(old);
    expect(statSync(join(dir, 'sessions.json')).mode & 0o777).toBe(0o600);
  });
});

describe('10. what people reach for', () => {
  it('`svc completion bash` is a valid script that completes subcommands and options; zsh and fish scripts are generated', async () => {
    const dir = dirOf('completion');
    const r = await svc(['completion', 'bash'], { dir });
    expect(r.code, r.stderr).toBe(0);
    const file = join(tmp, 'svc.bash');
    writeFileSync(file, r.stdout);
    execFileSync('bash', ['-n', file]);
    const complete = (...words: string[]) =>
      execFileSync('bash', ['-c', `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _svc; echo "\${COMPREPLY[*]}"`], { encoding: 'utf8' }).trim();
    expect(complete('svc', 'sand')).toBe('sandbox');
    expect(complete('svc', '--json', 'sandbox', 'ex')).toBe('exec');
    expect(complete('svc', 'auth', 'st')).toBe('status');
    expect(complete('svc', 'usage', '--cs')).toBe('--csv');
    expect(complete('svc', 'chat', '--api-k')).toBe('--api-key-file');
    expect((await svc(['completion', 'zsh'], { dir })).stdout).toMatch(/^#compdef svc\n[\s\S]*^sandbox:Sandbox sessions/m);
    expect((await svc(['completion', 'fish'], { dir })).stdout).toMatch(/^complete -c svc -n '__fish_seen_subcommand_from sandbox; and not __fish_seen_subcommand_from [^']*' -a 'exec'/m);
    expectOneLineError(await svc(['completion', 'tcsh'], { dir }), 2, /value 'tcsh' is invalid for argument 'shell'\. Allowed choices are bash, zsh, fish/);
  });

  it('`svc api` calls any route with the session or key attached, prints the body and exits by status', async () => {
    const me = await account('api', a);
    const dir = me.dir;
    // A session route, with an API key in the environment too: refused for the key's kind, sent again with the session.
    const who = await svc(['api', '/v1/auth/me'], { dir, url: a.url, env: { SVC_KEY: me.key } });
    expect(who.code, who.stderr).toBe(0);
    expect(JSON.parse(who.stdout)).toMatchObject({ account_id: me.accountId });

    const created = await svc(['api', 'POST', '/v1/keys', '-f', 'name=from-api', '-F', 'spend_cap_micro_usd=5000000', '-f', 'scopes[]=inference'], { dir, url: a.url });
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'from-api', spend_cap_micro_usd: 5_000_000, scopes: ['inference'], key: expect.stringMatching(/^sk-svc_/) });

    const missing = await svc(['api', 'DELETE', '/v1/keys/key_nope'], { dir, url: a.url });
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: { type: 'not_found' } });
    expect(missing.stderr).toBe('error: HTTP 404 not_found from DELETE /v1/keys/key_nope\n');

    const body = join(tmp, 'chat.json');
    writeFileSync(body, JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] }));
    const unpaid = await svc(['api', 'POST', '/v1/chat/completions', '--input', body], { dir, url: a.url, env: { SVC_KEY: me.key } });
    expect(unpaid.code).toBe(5);
    expect(JSON.parse(unpaid.stdout)).toMatchObject({ error: { type: 'insufficient_credit' } });

    const included = await svc(['api', '-i', '/readyz'], { dir, url: a.url });
    expect(included.stdout).toMatch(/^HTTP\/1\.1 200 OK\n(?:[a-z-]+: .*\n)*x-request-id: req_\w+\n(?:[a-z-]+: .*\n)*\nok\n$/);
    expectOneLineError(await svc(['api', 'POST', '/v1/keys', '--input', join(tmp, 'absent.json')], { dir, url: a.url }), 2, /^error: cannot read \S+absent\.json: no such file or directory$/);
  });

  it('colours errors on a terminal, and not with NO_COLOR or through a pipe', async () => {
    const dir = dirOf('colour');
    const tty = await svcTty(['keys', 'list'], { dir, url: a.url });
    expect(tty.code).toBe(4);
    expect(tty.screen).toContain('\x1b[31merror:\x1b[39m not signed in to');
    const plain = await svcTty(['keys', 'list'], { dir, url: a.url, env: { NO_COLOR: '1' } });
    expect(plain.screen).toMatch(/^error: not signed in to/m);
    expect(plain.screen).not.toContain('\x1b[');
    expect((await svc(['keys', 'list'], { dir, url: a.url })).stderr).toMatch(/^error: not signed in/);
  });

  it('refuses `svc usage --csv --json` as contradictory (exit 2), before any call', async () => {
    expectOneLineError(await svc(['usage', '--csv', '--json'], { dir: dirOf('nobody'), url: a.url }), 2, /^error: --csv and --json ask for two different outputs; pass one of them$/);
  });

  it('names what went wrong with a file in words, never a bare errno code', async () => {
    const dir = dirOf('files');
    const runs = await Promise.all([
      svc(['chat', 'hi', '--api-key-file', join(tmp, 'absent.key')], { dir, url: a.url }),
      svc(['login', '--key-file', join(tmp, 'absent.key')], { dir, url: a.url }),
      svc(['receipts', 'verify', join(tmp, 'absent.json')], { dir, url: a.url }),
      svc(['login', '--key-file', tmp], { dir, url: a.url }),
    ]);
    for (const r of runs.slice(0, 3)) expectOneLineError(r, 2, /absent\.\w+: no such file or directory/);
    expectOneLineError(runs[3]!, 2, /: it is a directory/);
    for (const r of runs) expect(r.stderr).not.toMatch(/\bE[A-Z]{3,}\b/);
    const down = await svc(['status'], { dir, url: 'http://127.0.0.1:9' });
    expectOneLineError(down, 1, /^error: cannot reach the gateway at http:\/\/127\.0\.0\.1:9: /);
    expect(down.stderr).not.toMatch(/\bE[A-Z]{3,}\b/);
  });

  it('says "not a svc gateway" for a URL that answers something else', async () => {
    const dir = dirOf('other');
    expectOneLineError(await svc(['status'], { dir, url: otherUrl }), 1, new RegExp(`^error: ${otherUrl.replace(/\./g, '\\.')} is not a svc gateway: its answer is not the gateway's JSON; check --url`));
    expectOneLineError(await svc(['keys', 'list'], { dir: dirOf('api'), url: otherUrl }), 4, /not signed in to/);
    expectOneLineError(await svc(['chat', 'hi', '--model', 'm'], { dir, url: otherUrl, env: { SVC_KEY: 'sk-svc_abcdefghijklmnopqrstuvwxyz' } }), 1, /is not a svc gateway: it answered HTTP 404/);
  });
});
