import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** What the scripted server does with one request (its JSON body parsed). */
export type Handler = (req: IncomingMessage, body: any, res: ServerResponse) => void | Promise<void>;

/**
 * An OpenAI-compatible server on loopback whose answer each test scripts (`handler`), recording every request
 * and whether its caller went away before the answer ended. Used as a provider, or as a node's local server.
 */
export interface ScriptedUpstream {
  /** Base URL, ending in /v1. */
  url: string;
  handler: Handler;
  seen: Array<{ body: any; aborted: boolean }>;
  close(): Promise<void>;
}

export async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  let server: Server;
  const up: ScriptedUpstream = {
    url: '',
    handler: (_q, _b, res) => void res.end('{}'),
    seen: [],
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const rec = { body: JSON.parse(raw || '{}'), aborted: false };
      up.seen.push(rec);
      res.on('close', () => {
        if (!res.writableEnded) rec.aborted = true;
      });
      void up.handler(req, rec.body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  up.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
  return up;
}

/** One SSE frame: `data: ...` (a string as it is, anything else as JSON). */
export const sse = (o: unknown) => `data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`;

/** A chat completion chunk of `model` with `content` (null: an empty delta) and a finish_reason. */
export const chatChunk = (model: string, content: string | null, finish: string | null = null) => ({
  id: 'c1',
  object: 'chat.completion.chunk',
  created: 1,
  model,
  choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }],
});

/** A handler that streams `total` chunks of `piece` as fast as its caller takes them (it honours backpressure), then stops. */
export const flood =
  (model: string, piece: string, total: number, wrote: () => void = () => undefined): Handler =>
  async (_q, _b, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < total && !res.destroyed; i++) {
      if (!res.write(sse(chatChunk(model, piece)))) await drainOrClose(res);
      wrote();
    }
    if (!res.destroyed) res.end(sse(chatChunk(model, null, 'stop')) + sse('[DONE]'));
  };

/** Resolves on the response's next drain or close, and leaves no listener behind. */
const drainOrClose = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });
