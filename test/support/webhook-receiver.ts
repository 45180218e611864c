import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { freePort } from './gateway.ts';

/** A loopback HTTP server that records every webhook delivery it receives (headers and raw body). */
export class WebhookReceiver {
  hits: Array<{ headers: Record<string, string>; body: string }> = [];
  private server: Server | undefined;
  private constructor(readonly port: number) {}

  static async open(path = '/hooks'): Promise<WebhookReceiver> {
    const r = new WebhookReceiver(await freePort());
    r.path = path;
    const flat = (h: IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
    r.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        r.hits.push({ headers: flat(req.headers), body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => r.server!.listen(r.port, '127.0.0.1', resolve));
    return r;
  }

  private path = '/hooks';
  get url(): string {
    return `http://127.0.0.1:${this.port}${this.path}`;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/**
 * Verifies a delivery with the standardwebhooks package, as a receiver would. Its timestamp check uses the
 * wall clock, and the gateway's clock is the test's: `at` is the gateway's time of delivery.
 */
export function verifyDelivery(secret: string, hit: { headers: Record<string, string>; body: string }, at: Date): any {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
  try {
    return new Webhook(secret).verify(hit.body, hit.headers);
  } finally {
    vi.useRealTimers();
  }
}
