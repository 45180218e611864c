import type { FastifyReply } from 'fastify';
import { RECEIPT_HEADERS } from '@svc/shared';
import type { CallerSignal } from './caller-signal.ts';

/**
 * The most a stream keeps for a caller that does not read it (bytes in Node's buffers): past it the caller is
 * disconnected. A producer that awaits `drained()` never comes near it; one that does not (the usage feed)
 * would otherwise pile its events up in memory for a subscriber that stopped reading.
 */
const MAX_BUFFERED = 16 * 1024 * 1024;

/** A server-sent-events stream on a reply: `event`/`id`/`data` frames and keep-alive comments. */
export class SseStream {
  private closed = false;
  private readonly keepAlive: NodeJS.Timeout;
  private readonly stallMs: number | null;
  constructor(
    private readonly reply: FastifyReply,
    opts: { keepAliveMs?: number; stallMs?: number } = {},
  ) {
    const keepAliveMs = opts.keepAliveMs ?? 15_000;
    this.stallMs = opts.stallMs ?? null;
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': reply.request.id,
    });
    reply.raw.write(': connected\n\n');
    this.keepAlive = setInterval(() => this.comment('keep-alive'), keepAliveMs);
    this.keepAlive.unref();
    reply.raw.on('close', () => this.close());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  onClose(fn: () => void): void {
    this.reply.raw.on('close', fn);
  }

  send(data: unknown, opts: { event?: string; id?: string | number } = {}): void {
    if (this.closed) return;
    let frame = '';
    if (opts.event) frame += `event: ${opts.event}\n`;
    if (opts.id !== undefined) frame += `id: ${opts.id}\n`;
    frame += `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
    this.reply.raw.write(frame);
    if (this.reply.raw.writableLength > MAX_BUFFERED) this.reply.raw.destroy();
  }

  /**
   * Resolves once what was written went out to the caller's socket, or the caller left; null when nothing
   * waits. A producer that awaits it goes at the pace of a slow reader instead of filling memory for it.
   * A caller that takes nothing for `stallMs` (one that vanished without closing, or stopped reading) is
   * disconnected: it would otherwise hold the stream, and what feeds it, until its TCP connection died.
   * "Takes nothing" is measured as Node can see it: what waits (the last frame and up to 16 KiB before it)
   * did not all go out within `stallMs`. Node counts a write as waiting until the whole of it went out, so a
   * caller reading slower than a frame per `stallMs` is cut too (a 1 MiB frame at under 17 KB/s, at 60 s).
   */
  drained(): Promise<void> | null {
    const raw = this.reply.raw;
    if (this.closed || !raw.writableNeedDrain) return null;
    return new Promise((resolve) => {
      const stall = this.stallMs === null ? undefined : setTimeout(() => raw.destroy(), this.stallMs).unref();
      const done = () => {
        clearTimeout(stall);
        raw.off('drain', done);
        raw.off('close', done);
        resolve();
      };
      raw.on('drain', done);
      raw.on('close', done);
    });
  }

  comment(text: string): void {
    if (!this.closed) this.reply.raw.write(`: ${text}\n\n`);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    this.reply.raw.end();
  }
}

/**
 * An SSE response opened on first use, so that errors before the first frame keep their HTTP status. Its headers
 * carry `x-svc-receipt-id` (the request id): the receipt of a stream whose caller left can be fetched later.
 */
export class LazySse {
  private sse: SseStream | null = null;
  constructor(
    private readonly reply: FastifyReply,
    private readonly signal: CallerSignal,
    /** See SseStream.drained. */
    private readonly stallMs?: number,
  ) {}

  get opened(): boolean {
    return this.sse !== null;
  }

  get closed(): boolean {
    return this.signal.aborted || (this.sse?.isClosed ?? false);
  }

  open(): SseStream {
    if (!this.sse) {
      this.reply.raw.setHeader(RECEIPT_HEADERS.id, this.reply.request.id);
      this.sse = new SseStream(this.reply, { stallMs: this.stallMs });
    }
    return this.sse;
  }

  send(data: unknown, event?: string): void {
    this.open().send(data, event ? { event } : {});
  }

  /** See SseStream.drained. */
  drained(): Promise<void> | null {
    return this.sse?.drained() ?? null;
  }

  close(): void {
    this.sse?.close();
  }
}
