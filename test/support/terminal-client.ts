import WebSocket from 'ws';

/** What the gateway answered instead of upgrading: status and error envelope. */
export interface Refusal {
  status: number;
  body: { error?: { type: string; message: string; reason?: string } };
}

/** A frame the gateway sent as text (ready, exit, error). */
export type TextFrame = { type: string } & Record<string, any>;

/**
 * A WebSocket client of a session's terminal (`GET /v1/sandboxes/sessions/:id/terminal`), as a program would
 * drive it: keystrokes as binary frames, JSON text frames for the rest; it gathers the screen and the text frames.
 */
export class TerminalClient {
  screen = '';
  readonly frames: TextFrame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, binary) => {
      if (binary) this.screen += Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
      else this.frames.push(JSON.parse(String(data)) as TextFrame);
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        for (const w of this.waiters.splice(0)) w();
      }),
    );
  }

  /** Opens the terminal; the gateway's refusal (an HTTP answer instead of the upgrade) comes back as a Refusal. */
  /** `keyAs: 'subprotocol'`: the key goes as a browser sends it (it cannot set headers), as `svc.key.<key>` beside `svc.terminal`. */
  static open(baseUrl: string, key: string | null, sessionId: string, query: Record<string, string | number> = {}, keyAs: 'header' | 'subprotocol' = 'header'): Promise<TerminalClient | Refusal> {
    const url = new URL(`/v1/sandboxes/sessions/${sessionId}/terminal`, baseUrl);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
    const ws =
      keyAs === 'subprotocol' && key ? new WebSocket(url, ['svc.terminal', `svc.key.${key}`]) : new WebSocket(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new TerminalClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: body ? JSON.parse(body) : {} }));
      });
      ws.once('error', reject);
    });
  }

  type(text: string | Buffer): void {
    this.ws.send(typeof text === 'string' ? Buffer.from(text, 'utf8') : text, { binary: true });
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** Waits (event-driven) until `test` holds of the client, or fails after `timeoutMs` naming `what`. */
  async until<T>(what: string, test: () => T | undefined | false | null, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = test();
      if (v) return v;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; screen so far:\n${this.screen.slice(-2000)}`);
      await new Promise<void>((r) => {
        const timer = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
  }

  /** The screen's text after `from` that matches `re` (its first group, else the match). */
  match(re: RegExp, from = 0): Promise<RegExpExecArray> {
    return this.until(`${re} on the screen`, () => re.exec(this.screen.slice(from)));
  }

  frame(type: string): Promise<TextFrame> {
    return this.until(`a ${type} frame`, () => this.frames.find((f) => f.type === type));
  }
}

export const isRefusal = (x: TerminalClient | Refusal): x is Refusal => !(x instanceof TerminalClient);
