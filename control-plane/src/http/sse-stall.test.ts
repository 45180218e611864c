import { request, type IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { SseStream } from './sse.ts';

/**
 * SseStream's stall limit on a real Fastify server, over a unix socket (the kernel's share of what waits stays
 * small, about 200 kB, whatever TCP's autotuning would do): a caller taking nothing is cut.
 */
let app: FastifyInstance | null = null;
let dir: string | null = null;
afterEach(async () => {
  await app?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  [app, dir] = [null, null];
});

const STALL_MS = 1000;
const FRAME = 1024 * 1024;
const FRAMES = 3;

/** A server whose one route sends FRAMES frames of FRAME bytes as the inference stream does (each followed by drained()). */
async function server(): Promise<{ path: string; outcome: () => string }> {
  dir = mkdtempSync(join(tmpdir(), 'sse-stall-'));
  const path = join(dir, 's.sock');
  let outcome = 'running';
  app = Fastify();
  app.get('/s', async (_req, reply) => {
    const sse = new SseStream(reply, { stallMs: STALL_MS });
    for (let i = 0; i < FRAMES && !sse.isClosed; i++) {
      sse.send('x'.repeat(FRAME));
      const d = sse.drained();
      if (d) await d;
    }
    outcome = sse.isClosed ? 'cut' : 'finished';
    sse.send('end');
    sse.close();
  });
  await app.listen({ path });
  return { path, outcome: () => outcome };
}

const get = (path: string) =>
  new Promise<IncomingMessage>((resolve) => {
    const req = request({ socketPath: path, path: '/s' });
    req.on('error', () => undefined);
    req.on('response', (res) => {
      res.pause();
      resolve(res);
    });
    req.end();
  });

describe('SseStream stall limit', () => {
  it('cuts a caller that takes nothing', async () => {
    const s = await server();
    await get(s.path); // reads the head, then nothing
    for (let i = 0; i < 100 && s.outcome() === 'running'; i++) await new Promise((r) => setTimeout(r, 100));
    expect(s.outcome()).toBe('cut');
  });
});
