import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { dial, readAll } from './upstream.ts';

describe('upstream connections', () => {
  it('retire an idle socket a second before the server said it closes it, so no call goes out on a socket being closed', async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    server.keepAliveTimeout = 3000; // answered as `Keep-Alive: timeout=3`
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const self = { publicUrl: new URL('https://gateway.example'), port: 8080, host: '127.0.0.1', allowPrivate: true };
      const signal = AbortSignal.timeout(5000);
      const res = await dial(new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`), { method: 'POST', headers: {}, body: '{}', signal }, self);
      expect(res.headers['keep-alive']).toBe('timeout=3');
      const socket = res.socket as Socket;
      await readAll(res, 1024, signal);
      await new Promise((r) => setImmediate(r)); // back in the agent's pool of free sockets
      expect(socket.destroyed).toBe(false);
      expect(socket.timeout).toBe(2000);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
