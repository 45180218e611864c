import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { ProviderClient, post } from './upstream.ts';

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

  it('an answer within the limit is parsed; the caller going away aborts the call with its own reason', async () => {
    const url = await serve((req, res) => {
      req.resume();
      if (req.url?.endsWith('/ok')) return void res.end('{"ok":true}');
    });
    const client = new ProviderClient(5_000);
    expect(await client.json(provider(url), '/ok', {}, new AbortController().signal)).toEqual({ ok: true });
    const ac = new AbortController();
    const call = client.json(provider(url), '/hang', {}, ac.signal);
    setTimeout(() => ac.abort(new Error('caller went away')), 50);
    await expect(call).rejects.toThrow('caller went away');
  });
});
