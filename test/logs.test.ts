import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as ptySpawn } from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { until } from './support/agent.ts';
import { freshDatabase } from './support/database.ts';
import { seedEmbeddedDatabase } from './support/database-templates.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { GATEWAY_ARGS } from './support/built.ts';
import { freePort } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * The gateway's log as `npm start` writes it, from the real process: JSON records when stdout is not a terminal
 * (or SVC_LOG_FORMAT=json), readable lines on a terminal (a pty); one line per request in either, with the time,
 * method, path, status, duration, request id and error type, and for a stream how it ended (completed, caller
 * gone, upstream broke). The upstream is a scripted OpenAI-compatible server on loopback.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const withAgent = sandboxImage(SMALL_IMAGE, 'the terminal log test with the local agent');
let up: ScriptedUpstream;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = async (_req, body, res) => {
    const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk('Hello'));
    if (body.model === 'broken') {
      // The answer is under way (the caller has had some of it), then the upstream dies.
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 150));
        res.write(chunk(` part ${i}`));
      }
      return void res.destroy();
    }
    if (body.model === 'slow') return void setInterval(() => !res.destroyed && res.write(chunk(' more')), 100).unref();
    res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })}\n\n`);
    res.end('data: [DONE]\n\n');
  };
});
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await up?.close();
});

interface Started {
  url: string;
  output: () => string;
}

/** `npm start`'s process on a fresh data dir: its stdout a pipe, or a terminal (a pty of 160 columns). */
async function startGateway(opts: { tty: boolean; env?: Record<string, string> }): Promise<Started> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-logs-'));
  const db = await freshDatabase();
  if (!db.url) await seedEmbeddedDatabase(dataDir);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    PORT: String(port),
    SVC_PUBLIC_URL: url,
    SVC_DATA_DIR: dataDir,
    ...(db.url ? { DATABASE_URL: db.url } : {}),
    SVC_LOCAL_AGENT: 'off',
    SVC_PROVIDERS: JSON.stringify([{ name: 'up', base_url: up.url, models: ['ok', 'broken', 'slow'].map((id) => ({ id, input_micro_usd_per_mtok: 0 })) }]),
    ...opts.env,
  };
  const args = GATEWAY_ARGS;
  let out = '';
  let stop: () => Promise<void>;
  if (opts.tty) {
    const term = ptySpawn(process.execPath, args, { name: 'xterm-256color', cols: 160, rows: 50, cwd: ROOT, env });
    const exited = new Promise<void>((r) => term.onExit(() => r()));
    term.onData((d) => (out += d));
    stop = async () => {
      term.kill('SIGTERM');
      await exited;
    };
  } else {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    stop = async () => {
      child.kill('SIGTERM');
      await exited;
    };
  }
  cleanups.push(async () => {
    await stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  await until('the gateway listens', async () => (await fetch(`${url}/healthz`).catch(() => null))?.ok === true, 150_000);
  return { url, output: () => out };
}

/** Requests of each kind the line tells apart: a 200, a 404, and streams that complete, break upstream, and lose their caller. */
async function exercise(url: string): Promise<void> {
  expect((await fetch(`${url}/v1/models`)).status).toBe(200);
  expect((await fetch(`${url}/v1/nope`)).status).toBe(404);
  const { client } = await new SvcClient({ baseUrl: url }).signIn(privateKeyToAccount(generatePrivateKey()));
  const key = (await client.createKey()).key;
  const chat = (model: string, signal?: AbortSignal) =>
    fetch(`${url}/v1/chat/completions`, { method: 'POST', signal, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'Hi' }] }) });
  expect(await (await chat('ok')).text()).toContain('[DONE]');
  expect(await (await chat('broken')).text()).toContain('upstream_error');
  const ac = new AbortController();
  const slow = await chat('slow', ac.signal);
  await slow.body!.getReader().read(); // the answer began; then the caller leaves
  ac.abort();
}

const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

describe('the request log', () => {
  it('is JSON records when stdout is not a terminal: one per request, with its status, duration, request id, error type and stream end', async () => {
    const g = await startGateway({ tty: false });
    await exercise(g.url);
    const records = () =>
      g
        .output()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    await until('the abandoned stream is logged', async () => records().some((r) => r.stream === 'caller_gone'), 30_000);
    const requests = records().filter((r) => typeof r.status === 'number');
    const line = (path: string, model?: string) => requests.filter((r) => r.path === path && (!model || r.stream !== undefined));
    expect(line('/v1/models')).toEqual([expect.objectContaining({ level: 30, method: 'GET', status: 200, duration_ms: expect.any(Number), reqId: expect.stringMatching(/^req_/), msg: expect.stringMatching(/^GET \/v1\/models 200 [\d.]+ ms$/) })]);
    expect(line('/v1/nope')).toEqual([expect.objectContaining({ status: 404, error_type: 'not_found', msg: expect.stringMatching(/^GET \/v1\/nope 404 [\d.]+ ms not_found$/) })]);
    const streams = requests.filter((r) => r.path === '/v1/chat/completions').map((r) => [r.status, r.stream, r.error_type]);
    expect(streams).toEqual([
      [200, 'completed', undefined],
      [200, 'upstream_broke', 'upstream_error'],
      [200, 'caller_gone', undefined],
    ]);
    // One line per request: no "incoming request" / "request completed" pairs.
    expect(records().filter((r) => r.msg === 'incoming request' || r.msg === 'request completed')).toEqual([]);
  }, 240_000);

  it.skipIf(!withAgent)('is readable lines on a terminal, coloured, the local agent’s lines among them; SVC_LOG_FORMAT=json and NO_COLOR are honoured', async () => {
    const g = await startGateway({ tty: true, env: { SVC_LOCAL_AGENT: 'auto', SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '0' } });
    await exercise(g.url);
    await until('the abandoned stream is logged', async () => /\(stream caller_gone\)/.test(g.output().replace(ANSI, '')), 30_000);
    await until('the local agent connects', async () => /agent channel open/.test(g.output().replace(ANSI, '')), 90_000);
    const text = g.output().replace(ANSI, '');
    const lines = text.split(/\r?\n/).filter(Boolean);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}GET \/v1\/models 200 [\d.]+ ms {2}req_\w+$/m);
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}GET \/v1\/nope 404 [\d.]+ ms not_found {2}req_\w+$/m);
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}POST \/v1\/chat\/completions 200 [\d.]+ ms upstream_error \(stream upstream_broke\) {2}req_\w+$/m);
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}POST \/v1\/chat\/completions 200 [\d.]+ ms \(stream completed\) {2}req_\w+$/m);
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}gateway listening on http:\/\/127\.0\.0\.1:\d+ \(storage: /m);
    // The agent's own lines, in the same shape (its `[svc-node] <time>` prefix replaced by the gateway's).
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}agent channel open$/m);
    expect(text).not.toMatch(/\[svc-node\]/);
    expect(g.output()).toMatch(/\x1b\[32m200\x1b\[0m/); // a 2xx status in green

    const plain = await startGateway({ tty: true, env: { NO_COLOR: '1' } });
    await fetch(`${plain.url}/v1/models`);
    await until('the request is logged', async () => /GET \/v1\/models 200/.test(plain.output()), 30_000);
    expect(plain.output()).not.toMatch(/\x1b\[3\dm/);

    const json = await startGateway({ tty: true, env: { SVC_LOG_FORMAT: 'json' } });
    await fetch(`${json.url}/v1/models`);
    await until('the request is logged', async () => /"path":"\/v1\/models"/.test(json.output()), 30_000);
    for (const l of json.output().split(/\r?\n/).filter(Boolean)) expect(() => JSON.parse(l), l).not.toThrow();
  }, 400_000);
});
