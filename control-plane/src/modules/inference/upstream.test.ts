import { spawn } from 'node:child_process';
import { createServer, type RequestListener, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { ProviderClient, post, retryAfterSeconds } from './upstream.ts';

/**
 * A request to a provider is never sent twice, whatever happens to its connection: the provider may have
 * taken it (and billed it) before the connection broke. The call fails instead.
 */
let server: Server | null = null;
afterEach(async () => {
  await new Promise((r) => (server ? (server.closeAllConnections(), server.close(r)) : r(null)));
  server = null;
});

/** A server that answers a connection's first request and drops the connection at its `dropAt`-th. */
async function start(opts: { dropAt: number; dropAfterHead?: boolean }) {
  const perSocket = new Map<Socket, number>();
  const seen: Array<{ socket: number; n: number }> = [];
  const sockets: Socket[] = [];
  server = createServer((req, res) => {
    req.resume();
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    if (!sockets.includes(req.socket)) sockets.push(req.socket);
    seen.push({ socket: sockets.indexOf(req.socket), n });
    if (n === opts.dropAt && !opts.dropAfterHead) return req.socket.destroy();
    res.writeHead(200, { 'content-type': 'application/json' });
    if (n === opts.dropAt) {
      res.write('{"partial":');
      setImmediate(() => req.socket.destroy());
      return;
    }
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/chat/completions`;
  return { url, seen };
}

async function call(url: string): Promise<string> {
  const res = await post(url, { 'content-type': 'application/json' }, '{}', new AbortController().signal);
  let text = '';
  for await (const c of res.body) text += c;
  await new Promise((r) => setImmediate(r)); // the socket goes back to the pool
  return text;
}

describe('provider connections', () => {
  it('never re-sends when a kept-alive connection is closed under the request', async () => {
    const s = await start({ dropAt: 2 });
    expect(await call(s.url)).toBe('{"ok":true}');
    await expect(call(s.url)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    // The second request went out on the first connection, was dropped there, and went nowhere else.
    expect(s.seen).toEqual([
      { socket: 0, n: 1 },
      { socket: 0, n: 2 },
    ]);
    expect(await call(s.url)).toBe('{"ok":true}'); // the next call gets a new connection
  });

  it('never re-sends on a fresh connection', async () => {
    const s = await start({ dropAt: 1 });
    await expect(call(s.url)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(s.seen).toHaveLength(1);
  });

  it('never re-sends once the answer began', async () => {
    const s = await start({ dropAt: 2, dropAfterHead: true });
    await call(s.url);
    await expect(call(s.url)).rejects.toThrow();
    expect(s.seen).toHaveLength(2);
  });
});

describe('provider time limit', () => {
  const provider = (url: string) => ({ name: 'slow', baseUrl: url, apiKey: null, models: [] }) as unknown as Parameters<ProviderClient['json']>[0];

  async function serve(handler: RequestListener) {
    server = createServer(handler);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
  }

  it('a provider that sends no answer within the limit is a 504 upstream_timeout; one that stalls mid-body too', async () => {
    const url = await serve((req, res) => {
      req.resume();
      if (req.url?.endsWith('/stall')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"choices":');
      } // else: never answers
    });
    const client = new ProviderClient(300);
    for (const path of ['/silent', '/stall']) {
      const e = await client.json(provider(url), path, {}, new AbortController().signal).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ServiceError);
      expect(e).toMatchObject({ type: 'upstream_timeout', status: 504 });
    }
  });

  it('a provider whose port takes no connection is a 504 upstream_timeout, for JSON calls and streams', async () => {
    // A socket that listens with a backlog of 0 and never accepts: once its queue is full, the kernel drops
    // further connection attempts, so they neither connect nor fail.
    const py = spawn('python3', ['-c', "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(120)"], { stdio: ['ignore', 'pipe', 'inherit'] });
    const fillers: Socket[] = [];
    try {
      const port = await new Promise<number>((resolve, reject) => {
        py.stdout.once('data', (d) => resolve(Number(String(d))));
        py.once('error', reject);
      });
      for (let i = 0; i < 3; i++) fillers.push(connect(port, '127.0.0.1').on('error', () => undefined));
      const client = new ProviderClient(300);
      const url = `http://127.0.0.1:${port}/v1`;
      const e = await client.json(provider(url), '/chat/completions', {}, new AbortController().signal).catch((x: unknown) => x);
      expect(e).toMatchObject({ type: 'upstream_timeout', status: 504 });
      const s = await client.stream(provider(url), '/chat/completions', {}, new AbortController().signal).catch((x: unknown) => x);
      expect(s).toMatchObject({ type: 'upstream_timeout', status: 504 });
    } finally {
      for (const f of fillers) f.destroy();
      py.kill();
    }
  });

  it('an answer within the limit is parsed; the caller going away aborts the call with its own reason', async () => {
    const url = await serve((req, res) => {
      req.resume();
      if (req.url?.endsWith('/ok')) return void res.end('{"ok":true}');
    });
    const client = new ProviderClient(5_000);
    expect((await client.json(provider(url), '/ok', {}, new AbortController().signal)).body).toEqual({ ok: true });
    const ac = new AbortController();
    const call = client.json(provider(url), '/hang', {}, ac.signal);
    setTimeout(() => ac.abort(new Error('caller went away')), 50);
    await expect(call).rejects.toThrow('caller went away');
  });
});

async function collect(frames: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const f of frames) out.push(f);
  return out;
}

describe('provider calls waiting for a connection', () => {
  const provider = (url: string) => ({ name: 'busy', baseUrl: url, apiKey: null, models: [] }) as unknown as Parameters<ProviderClient['json']>[0];

  /**
   * `/hold` answers at once and then sends a space every 50 ms (no time limit between chunks runs out) until
   * `release()`, which ends it as `{"held":true}` (JSON or SSE); `/ok` answers at once.
   */
  async function busyServer() {
    const paths: string[] = [];
    let connections = 0;
    const holding: Array<() => void> = [];
    let held = () => {};
    const holds = new Promise<void>((r) => (held = r));
    server = createServer((req, res) => {
      req.resume();
      paths.push(req.url ?? '');
      const sse = req.headers.accept === 'text/event-stream';
      res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json' });
      if (!req.url?.endsWith('/hold')) return void res.end(sse ? 'data: {"ok":true}\n\n' : '{"ok":true}');
      res.write(sse ? ': held\n\n' : '{"held":');
      const tick = setInterval(() => res.write(sse ? ': held\n\n' : ' '), 50);
      holding.push(() => {
        clearInterval(tick);
        res.end(sse ? 'data: {"held":true}\n\n' : 'true}');
      });
      held();
    });
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
    /** `holds`: the first `/hold` call has its answer under way. */
    return { url, paths, holds, connections: () => connections, release: () => holding.splice(0).forEach((f) => f()) };
  }

  it('a JSON call queued behind busy connections gets upstream_timeout and is never sent; later calls go through', async () => {
    const s = await busyServer();
    const client = new ProviderClient(300, 1);
    const first = client.json(provider(s.url), '/hold', {}, new AbortController().signal);
    await s.holds;
    const given = await Promise.all([1, 2, 3].map(() => client.json(provider(s.url), '/ok', {}, new AbortController().signal).catch((x: unknown) => x)));
    for (const e of given) {
      expect(e).toBeInstanceOf(ServiceError);
      expect(e).toMatchObject({ type: 'upstream_timeout', status: 504 });
    }
    expect(s.paths).toEqual(['/v1/hold']); // the first still holds the only connection
    s.release();
    expect((await first).body).toEqual({ held: true });
    expect((await client.json(provider(s.url), '/ok', {}, new AbortController().signal)).body).toEqual({ ok: true });
    // The calls given up were never sent, and no connection was opened for them.
    expect(s.paths).toEqual(['/v1/hold', '/v1/ok']);
    expect(s.connections()).toBe(1);
  });

  it('a queued JSON call ends as soon as its caller goes away', async () => {
    const s = await busyServer();
    const client = new ProviderClient(60_000, 1);
    const first = client.json(provider(s.url), '/hold', {}, new AbortController().signal);
    await s.holds;
    const ac = new AbortController();
    const queued = client.json(provider(s.url), '/ok', {}, ac.signal);
    ac.abort(new Error('caller went away'));
    await expect(queued).rejects.toThrow('caller went away');
    s.release();
    await first;

    expect(s.paths).toEqual(['/v1/hold']);
  });

  it('a call whose caller is already gone is not sent and costs no connection', async () => {
    const s = await busyServer();
    const client = new ProviderClient(5_000, 1);
    expect((await client.json(provider(s.url), '/ok', {}, new AbortController().signal)).body).toEqual({ ok: true });
    const ac = new AbortController();
    ac.abort(new Error('caller went away'));
    await expect(client.stream(provider(s.url), '/ok', {}, ac.signal)).rejects.toThrow('caller went away');
    await expect(client.json(provider(s.url), '/ok', {}, ac.signal)).rejects.toThrow('caller went away');
    expect((await client.json(provider(s.url), '/ok', {}, new AbortController().signal)).body).toEqual({ ok: true });
    expect(s.paths).toEqual(['/v1/ok', '/v1/ok']);
    expect(s.connections()).toBe(1); // the kept-alive connection survived them
  });

  it('a stream queued behind busy connections gets upstream_timeout, or ends when its caller goes away', async () => {
    const s = await busyServer();
    const client = new ProviderClient(300, 1);
    const held = await client.stream(provider(s.url), '/hold', {}, new AbortController().signal);
    await s.holds;
    const first = collect(held); // read as it comes, so its own time limit never runs out
    const queued = await client.stream(provider(s.url), '/ok', {}, new AbortController().signal).catch((x: unknown) => x);
    expect(queued).toMatchObject({ type: 'upstream_timeout', status: 504 });
    const ac = new AbortController();
    const gone = client.stream(provider(s.url), '/ok', {}, ac.signal);
    ac.abort(new Error('caller went away'));
    await expect(gone).rejects.toThrow('caller went away');
    s.release();
    expect(await first).toEqual(['{"held":true}']);
    expect(s.paths).toEqual(['/v1/hold']);
    // The slot came back with the end of the first stream's body: the next stream goes through.
    expect(await collect(await client.stream(provider(s.url), '/ok', {}, new AbortController().signal))).toEqual(['{"ok":true}']);
    expect(s.connections()).toBe(1);
  });

  it('streams and JSON calls to a provider share its connections', async () => {
    const s = await busyServer();
    const client = new ProviderClient(300, 1);
    const held = await client.stream(provider(s.url), '/hold', {}, new AbortController().signal);
    await s.holds;
    const first = collect(held);
    await expect(client.json(provider(s.url), '/ok', {}, new AbortController().signal)).rejects.toMatchObject({ type: 'upstream_timeout' });
    s.release();
    expect(await first).toEqual(['{"held":true}']);
    expect((await client.json(provider(s.url), '/ok', {}, new AbortController().signal)).body).toEqual({ ok: true });
    expect(s.paths).toEqual(['/v1/hold', '/v1/ok']);
    expect(s.connections()).toBe(1); // the stream's connection was kept alive for the JSON call
  });
});

describe('retryAfterSeconds', () => {
  it('reads seconds or an HTTP date, bounded to 1-3600; null when absent or unreadable', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(retryAfterSeconds('17', now)).toBe(17);
    expect(retryAfterSeconds(['30', '5'], now)).toBe(30);
    expect(retryAfterSeconds('Tue, 24 Nov 2026 12:01:30 GMT', now)).toBe(90);
    expect(retryAfterSeconds('Tue, 24 Nov 2026 11:00:00 GMT', now)).toBe(1);
    expect(retryAfterSeconds('999999', now)).toBe(3600);
    expect(retryAfterSeconds(undefined, now)).toBeNull();
    expect(retryAfterSeconds('soon', now)).toBeNull();
  });
});
