import { createServer, type Server } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from 'viem/accounts';
import { ENFORCED_BILLING, freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, words, type TestUpstream } from './support/upstream.ts';
import { WallClock, expectOneLineError, savedSession, secretFile, svc as runSvc, type CliRun } from './support/cli.ts';

/**
 * The caller commands of `svc` (chat, balance, usage, deposit, receipts verify, webhooks), run as the real
 * CLI in a child process against a running gateway whose model is a real OpenAI-compatible server on loopback.
 * Billing is enforced, so an account without credit gets the 402 and its payment terms. Sandbox runs are in
 * test/cli-run.test.ts.
 */
const MODEL = 'test-chat';
let up: TestUpstream;
let t: TestGateway;
let tmp: string;
/** SVC_CONFIG_DIR of the signed-in, funded account; `key` is its API key. */
let dir: string;
let key: string;
let accountId: string;
/** A signed-in account with no credit, and its key. */
let broke: { dir: string; key: string };

beforeAll(async () => {
  up = await startUpstream();
  t = await startTestGateway({
    clock: new WallClock(),
    env: {
      ...ENFORCED_BILLING,
      SVC_INFERENCE_TIMEOUT_SECONDS: '5',
      SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: MODEL, input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000 }] }]),
    },
  });
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-caller-'));
  [{ dir, key, accountId }, broke] = await Promise.all([account('funded'), account('broke')]);
  await t.gw.services.metering.credit(accountId, 10_000_000, 'grant', 'cli-caller-tests');
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[], opts: { dir?: string; env?: Record<string, string>; input?: string; url?: string | false; onStdout?: (sofar: string) => void } = {}): Promise<CliRun> =>
  runSvc(args, { dir: opts.dir ?? dir, url: opts.url === false ? undefined : (opts.url ?? t.url), env: opts.env, input: opts.input, onStdout: opts.onStdout });
const withKey = (k = key) => ({ SVC_KEY: k });

/** Signs in with `svc login` and creates an API key with `svc keys create`, as a person would. */
async function account(name: string): Promise<{ dir: string; key: string; accountId: string }> {
  const d = join(tmp, name);
  const login = await svc(['login', '--key-file', secretFile(tmp, `${name}.key`, generatePrivateKey())], { dir: d });
  expect(login.code, login.stderr).toBe(0);
  const created = await svc(['keys', 'create', '--json', '--name', name, '--scope', 'inference'], { dir: d });
  expect(created.code, created.stderr).toBe(0);
  const session = savedSession(d);
  return { dir: d, key: (JSON.parse(created.stdout) as { key: string }).key, accountId: session.account_id };
}

describe('refusals: one line that says what to do next, and an exit code per cause', () => {
  it('no session: the session commands exit 4 and point to `svc login`', async () => {
    const none = join(tmp, 'nobody');
    const runs = await Promise.all([
      svc(['balance'], { dir: none }),
      svc(['usage'], { dir: none }),
      svc(['deposit', '--chain', 'base', '--tx', `0x${'ab'.repeat(32)}`], { dir: none }),
      svc(['webhooks', 'list'], { dir: none }),
    ]);
    for (const r of runs) expectOneLineError(r, 4, /^error: not signed in to http:\/\/127\.0\.0\.1:\d+; run `svc login` to sign in$/);
  });

  it('an expired session is refused before any call, with the time it expired', async () => {
    const stale = join(tmp, 'stale');
    mkdirSync(stale, { recursive: true, mode: 0o700 });
    const session = savedSession(dir);
    writeFileSync(join(stale, 'sessions.json'), JSON.stringify({ default: session.url, sessions: { [session.url]: { ...session, expires_at: '2020-01-01T00:00:00.000Z' } } }), { mode: 0o600 });
    expectOneLineError(await svc(['balance'], { dir: stale }), 4, /^error: your session for http:\/\/127\.0\.0\.1:\d+ expired at 2020-01-01T00:00:00\.000Z; run `svc login`/);
  });

  it('no API key, or one the gateway does not know: exit 4, naming SVC_KEY and --api-key-file', async () => {
    const [missing, unknown] = await Promise.all([svc(['chat', 'hello']), svc(['chat', '--model', MODEL, 'hello'], { env: withKey('sk-svc_notarealkey0000000000000000') })]);
    expectOneLineError(missing, 4, /^error: no API key given; set SVC_KEY .* or pass --api-key-file <path>; create one with `svc keys create/);
    expectOneLineError(unknown, 4, /^error: invalid_credential: .*; the API key was refused: check SVC_KEY or --api-key-file/);
    expect(unknown.stderr).not.toContain('notarealkey');
  });

  it('an unknown model names the models the gateway serves', async () => {
    const r = await svc(['chat', '--model', 'no-such-model', 'hello'], { env: withKey() });
    expectOneLineError(r, 1, new RegExp(`^error: unknown model "no-such-model" at http://127\\.0\\.0\\.1:\\d+; pass --model with one of: ${MODEL}$`));
  });

  it('out of credit: exit 5 with the x402 payment terms and the deposit command', async () => {
    const r = await svc(['chat', 'hello'], { dir: broke.dir, env: withKey(broke.key) });
    const line = expectOneLineError(r, 5, /^error: insufficient_credit: /);
    expect(line).toContain(`to ${ENFORCED_BILLING.SVC_TREASURY_ADDRESS} on base`);
    expect(line).toContain(`(token ${ENFORCED_BILLING.SVC_USDT_CONTRACT})`);
    expect(line).toMatch(/send at least \d+(\.\d+)? USDT/);
    expect(line).toContain('then run `svc deposit --chain base --tx <hash>`');
    const balance = JSON.parse((await svc(['balance', '--json'], { dir: broke.dir })).stdout) as { spendable_micro_usd: number };
    expect(balance.spendable_micro_usd).toBe(0);
  });

  it('bad values are usage errors (exit 2) without a call', async () => {
    const runs = await Promise.all([
      svc(['deposit', '--chain', 'base', '--tx', '0x1234']),
      svc(['usage', '--since', 'last tuesday']),
      svc(['chat', '--max-tokens', '0', 'hi'], { env: withKey() }),
      svc(['webhooks', 'create', 'ftp://example.com/in']),
    ]);
    const commands = ['deposit', 'usage', 'chat', 'webhooks create'];
    for (const [i, r] of runs.entries()) expectOneLineError(r, 2, new RegExp(`; run \`svc ${commands[i]} --help\` for usage$`));
    expect(runs[0]!.stderr).toContain('0x followed by 64 hex digits');
    expect(runs[1]!.stderr).toContain('a duration back from now (30m, 24h, 7d, 2w)');
    expect(runs[3]!.stderr).toContain("'ftp://example.com/in' is invalid for argument 'url'. expected an http(s) URL");
  });
});

describe('svc chat', () => {
  it('streams the answer to stdout as it comes, and the receipt id and cost to stderr', async () => {
    // The upstream sends the first word, then holds the rest until the CLI has printed something: a CLI that
    // printed only at the end would never print, and the call would not end.
    let release!: () => void;
    up.switches.holdAfter = { pieces: 1, until: new Promise<void>((r) => (release = r)) };
    let r: CliRun;
    try {
      r = await svc(['chat', 'Say', 'hello'], { env: withKey(), onStdout: () => release() });
    } finally {
      release();
      up.switches.holdAfter = null;
    }
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${up.switches.reply}\n`);
    // Streamed: the first word alone came in the first read, before the upstream sent the rest.
    expect(r.chunks[0]!.text).toBe(words(up.switches.reply)[0]);
    const sent = up.requests.at(-1)!;
    expect(sent.body).toMatchObject({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Say hello' }] });
    // The only model served is the default.
    const m = /^receipt (\S+) {2}cost \$(\d+\.\d+)$/m.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    await t.gw.services.metering.settledAll();
    const stored = await t.gw.database.db.selectFrom('receipts').select(['id', 'payload']).where('id', '=', m![1]!).executeTakeFirstOrThrow();
    const cost = (JSON.parse(stored.payload) as { cost_micro_usd: number }).cost_micro_usd;
    expect(Math.round(Number(m![2]) * 1_000_000)).toBe(cost);
  });

  it('reads the prompt from stdin, and prints one JSON object with --json', async () => {
    const r = await svc(['chat', '--json', '--model', MODEL, '--system', 'Be brief.'], { env: withKey(), input: 'What is on stdin?\n' });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { content: string; model: string; finish_reason: string; receipt: { id: string; canonical: string; signature: string } };
    expect(out).toMatchObject({ content: up.switches.reply, model: MODEL, finish_reason: 'stop' });
    expect(out.receipt.id).toMatch(/\S/);
    expect(r.stderr).toContain(`receipt ${out.receipt.id}  cost $`);
    expect(up.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is on stdin?' },
    ]);
  });
});

describe('svc balance, usage, deposit', () => {
  it('balance: the credit position, as text or JSON', async () => {
    const [human, json] = await Promise.all([svc(['balance']), svc(['balance', '--json'])]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^spendable\s+\$\d+\.\d+$/m);
    expect(human.stdout).toMatch(/^billing\s+enforced/m);
    const b = JSON.parse(json.stdout) as { balance_micro_usd: number; spendable_micro_usd: number; billing_enforced: boolean };
    expect(b.billing_enforced).toBe(true);
    expect(b.balance_micro_usd).toBeLessThan(10_000_000); // the chats above were charged
    expect(b.balance_micro_usd).toBeGreaterThan(9_000_000);
  });

  it('usage: totals and latest events; --since as JSON; --csv with the header once', async () => {
    await t.gw.services.metering.settledAll();
    const [summary, json, csv] = await Promise.all([svc(['usage']), svc(['usage', '--json', '--since', '1h']), svc(['usage', '--csv', '--since', '1h', '--limit', '1'])]);
    expect(summary.code, summary.stderr).toBe(0);
    expect(summary.stdout).toMatch(/^events\s+2$/m);
    expect(summary.stdout).toContain('Latest events:');
    const events = (JSON.parse(json.stdout) as { events: Array<{ model: string; receipt_id: string }>; more: boolean }).events;
    expect(events).toHaveLength(2);
    expect(events.every((e) => e.model === MODEL)).toBe(true);
    expect(csv.code, csv.stderr).toBe(0);
    const lines = csv.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/receipt_id/);
    expect(lines[1]).toContain(events[0]!.receipt_id);
    expect(csv.stderr).toMatch(/^note: stopped at 1 events; pass --limit or --since for more$/m);
    // A window with nothing in it.
    const future = await svc(['usage', '--json', '--since', '2099-01-01T00:00:00Z']);
    expect(JSON.parse(future.stdout)).toEqual({ events: [], more: false });
  });

  it('deposit: a chain the gateway does not know is the gateway\'s one-line error', async () => {
    const r = await svc(['deposit', '--chain', 'nowhere', '--tx', `0x${'cd'.repeat(32)}`]);
    expectOneLineError(r, 1, /^error: invalid_request: Unknown chain "nowhere"; configured: none/);
    expect(r.stderr).toMatch(/^verifying 0xcdcd\S+ on nowhere$/m); // progress as a plain line: stderr is not a terminal
  });
});

describe('svc receipts verify', () => {
  let receiptFile: string;
  let chat: { receipt: { id: string; receipt: Record<string, unknown>; canonical: string; signature: string } };
  beforeAll(async () => {
    const r = await svc(['chat', '--json', 'receipt please'], { env: withKey() });
    expect(r.code, r.stderr).toBe(0);
    chat = JSON.parse(r.stdout) as typeof chat;
    receiptFile = join(tmp, 'receipt.json');
    writeFileSync(receiptFile, r.stdout);
  });

  /** A loopback proxy in front of the gateway that records every request: verification must make none but the signer's. */
  async function recordingProxy(): Promise<{ url: string; paths: string[]; close(): Promise<void> }> {
    const paths: string[] = [];
    const port = await freePort();
    const server: Server = createServer(async (req, res) => {
      paths.push(`${req.method} ${req.url}`);
      const upstream = await fetch(`${t.url}${req.url}`, { method: req.method });
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await upstream.arrayBuffer()));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${port}`, paths, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }

  it('offline: the signer address is fetched once and cached; then no call at all, even with the gateway gone', async () => {
    const proxy = await recordingProxy();
    const cacheDir = join(tmp, 'verifier');
    const first = await svc(['receipts', 'verify', receiptFile], { dir: cacheDir, url: proxy.url });
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual(chat.receipt.receipt);
    expect(first.stderr).toMatch(new RegExp(`^valid\\s+signed by ${t.gw.services.signer.address}, the receipt signer of ${proxy.url} \\(GET /v1/receipts/pubkey\\)$`, 'm'));
    expect(proxy.paths).toEqual(['GET /v1/receipts/pubkey']);
    expect(JSON.parse(readFileSync(join(cacheDir, 'signers.json'), 'utf8'))[proxy.url].address).toBe(t.gw.services.signer.address);

    const second = await svc(['receipts', 'verify', '--json', '-'], { dir: cacheDir, url: proxy.url, input: readFileSync(receiptFile, 'utf8') });
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ valid: true, recovered_address: t.gw.services.signer.address, payload: chat.receipt.receipt });
    expect(proxy.paths).toHaveLength(1);
    await proxy.close();
    const offline = await svc(['receipts', 'verify', receiptFile], { dir: cacheDir, url: proxy.url });
    expect(offline.code, offline.stderr).toBe(0);
    expect(offline.stderr).toMatch(/^valid\s+signed by .*\(cached /m);
  });

  it('a tampered receipt exits 1, printing the payload and why', async () => {
    const cost = chat.receipt.receipt.cost_micro_usd as number;
    const payload = { ...chat.receipt.receipt, cost_micro_usd: cost + 1 };
    // The payload changed beside its signed text.
    const mismatched = join(tmp, 'mismatched.json');
    writeFileSync(mismatched, JSON.stringify({ ...chat.receipt, receipt: payload }));
    // Payload and text changed together: the signature no longer recovers to the signer.
    const forged = join(tmp, 'forged.json');
    writeFileSync(forged, JSON.stringify({ receipt: payload, signature: chat.receipt.signature }));
    const [a, b, wrongSigner] = await Promise.all([
      svc(['receipts', 'verify', mismatched]),
      svc(['receipts', 'verify', forged, '--url', 'http://127.0.0.1:9', '--signer', t.gw.services.signer.address], { url: false }),
      svc(['receipts', 'verify', receiptFile, '--signer', `0x${'11'.repeat(20)}`]),
    ]);
    expect(a.code).toBe(1);
    expect(a.stderr).toMatch(/^INVALID: the payload does not match the signed canonical text$/m);
    expect(b.code).toBe(1);
    expect(JSON.parse(b.stdout)).toMatchObject({ cost_micro_usd: cost + 1 });
    expect(b.stderr).toMatch(new RegExp(`^INVALID: signed by 0x[0-9a-fA-F]{40}, not by ${t.gw.services.signer.address}$`, 'm'));
    expect(wrongSigner.code).toBe(1);
    expect(wrongSigner.stderr).toMatch(/^INVALID: signed by .*, not by 0x1111/m);
  });

  it('verifies a stored receipt (GET /v1/receipts/{id}) with a given signer and no gateway at all', async () => {
    const session = savedSession(dir);
    const stored = await t.client.withCredential({ kind: 'session', token: session.token }).receipt(chat.receipt.id);
    const file = join(tmp, 'stored.json');
    writeFileSync(file, JSON.stringify(stored));
    const r = await svc(['receipts', 'verify', file, '--url', 'http://127.0.0.1:9', '--signer', t.gw.services.signer.address], { url: false });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: chat.receipt.id });
    const junk = await svc(['receipts', 'verify', '-', '--signer', t.gw.services.signer.address], { input: 'not json' });
    expectOneLineError(junk, 2, /^error: stdin is not JSON; give the receipt as JSON/);
  });
});

describe('svc webhooks', () => {
  it('create (secret once), list, test, deliveries, delete', async () => {
    const hits: string[] = [];
    const port = await freePort();
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        hits.push(body);
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(port, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${port}/hooks/in`;
      const human = await svc(['webhooks', 'create', url, '--event', 'balance_low', '--description', 'ops']);
      expect(human.code, human.stderr).toBe(0);
      const secrets = human.stdout.match(/whsec_[A-Za-z0-9+/]+=*/g);
      expect(secrets).toHaveLength(1);
      expect(human.stdout).toMatch(/shown once/);
      const id = /Created webhook (wh_\S+)\./.exec(human.stdout)![1]!;

      const list = await svc(['webhooks', 'list']);
      expect(list.stdout).toMatch(new RegExp(`^${id}\\s+${url}\\s+balance_low\\s+yes\\s`, 'm'));
      expect(list.stdout).not.toContain(secrets![0]!.slice(6));

      const fired = await svc(['webhooks', 'test', id, '--json']);
      expect(fired.code, fired.stderr).toBe(0);
      const event = JSON.parse(fired.stdout) as { id: string; type: string; webhook_id: string };
      expect(event).toMatchObject({ type: 'webhook_test', webhook_id: id });
      t.clock.advance(1_000);
      await t.gw.leader.runAllOnce();
      expect(hits).toHaveLength(1);

      const [deliveries, human2] = await Promise.all([svc(['webhooks', 'deliveries', id, '--json']), svc(['webhooks', 'deliveries', id])]);
      expect(JSON.parse(deliveries.stdout)).toEqual([expect.objectContaining({ event_id: event.id, event_type: 'webhook_test', attempt: 1, status_code: 200, outcome: 'delivered' })]);
      expect(human2.stdout).toMatch(new RegExp(`\\s${event.id}\\s+webhook_test\\s+1\\s+200\\s+delivered\\s`));

      const removed = await svc(['webhooks', 'delete', id]);
      expect(removed.stdout).toMatch(new RegExp(`^Disabled webhook ${id} `));
      const unknown = await svc(['webhooks', 'test', 'wh_nope']);
      expectOneLineError(unknown, 1, /^error: not_found: /);
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

describe('a session the gateway no longer honours', () => {
  it('is refused with exit 4 and `svc login` (run last: it moves the clock past the session lifetime)', async () => {
    t.clock.advance(31 * 24 * 3600 * 1000);
    expectOneLineError(await svc(['balance']), 4, /^error: invalid_credential: .*; your session may have expired or been revoked; run `svc login`$/);
  });
});
