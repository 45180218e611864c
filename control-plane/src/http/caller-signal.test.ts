import { createServer, request, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { callerGone, type CallerSignal } from './caller-signal.ts';

let server: Server | null = null;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

/** A server whose handler gets each response's callerGone; `finish(res)` ends a response. */
async function serve(onRequest: (gone: CallerSignal, res: ServerResponse) => void): Promise<number> {
  server = createServer((req, res) => {
    req.resume();
    onRequest(callerGone(res), res);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

const get = (port: number) => {
  const req = request({ port, host: '127.0.0.1', path: '/' });
  req.on('error', () => undefined);
  req.end();
  return req;
};

describe('callerGone', () => {
  it('aborts once, with its reason, when the client leaves before the answer ended; a removed listener is not called', async () => {
    const heard: string[] = [];
    let gone!: CallerSignal;
    const got = new Promise<void>((ready) => {
      void serve((g) => {
        gone = g;
        g.addEventListener('abort', () => heard.push('first'));
        const removed = () => heard.push('removed');
        g.addEventListener('abort', removed);
        g.removeEventListener('abort', removed);
        g.addEventListener('abort', () => heard.push('second'), { once: true });
        ready();
      }).then((port) => {
        const req = get(port);
        void got.then(() => req.destroy());
      });
    });
    await got;
    expect(gone.aborted).toBe(false);
    await new Promise<void>((r) => gone.addEventListener('abort', r));
    expect(gone.aborted).toBe(true);
    expect((gone.reason as Error).message).toBe('caller went away');
    expect(heard).toEqual(['first', 'second']);
    gone.addEventListener('abort', () => heard.push('late')); // after the abort: never called
    expect(heard).toEqual(['first', 'second']);
  });

  it('does not abort when the answer ended, and is one object per response', async () => {
    let gone!: CallerSignal;
    let same = false;
    let closed!: Promise<void>;
    const port = await serve((g, res) => {
      gone = g;
      same = callerGone(res) === g;
      g.addEventListener('abort', () => {
        throw new Error('must not abort');
      });
      closed = new Promise((r) => res.on('close', () => r())); // after callerGone's own listener
      res.end('ok');
    });
    const req = get(port);
    await new Promise<void>((r) => req.on('response', (res) => res.resume().on('end', r)));
    req.destroy();
    await closed;
    expect(same).toBe(true);
    expect(gone.aborted).toBe(false);
  });
});
