import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import { ServiceError, TERMINAL_INPUT_CHUNK, TERMINAL_INPUT_WINDOW, TERMINAL_SIGNALS, TerminalEvent, type JobOutput, type SignedReceipt, type TerminalInput } from '@svc/shared';
import type { RunResult } from './schemas.ts';

/** The text frames a caller sends: a new window size, or a signal for the terminal's programs. */
export const CallerFrame = z.discriminatedUnion('type', [
  z.object({ type: z.literal('resize'), cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) }),
  z.object({ type: z.literal('signal'), name: z.enum(TERMINAL_SIGNALS) }),
]);

/** The largest frame a caller may send (keystrokes come in far smaller ones; a paste is split). */
export const MAX_CALLER_FRAME = 64 * 1024;
/** Screen output waiting on a caller's connection: above HIGH the node is held back, until it is down to LOW. */
const SEND_HIGH = 1024 * 1024;
const SEND_LOW = 256 * 1024;
/** What an input other than keystrokes counts for in the window. */
const CONTROL_BYTES = 64;
/** After `close`, how long the node may take to end the terminal before its job is cancelled. */
const CLOSE_GRACE_MS = 15_000;

type Frame = Record<string, unknown>;

/**
 * One terminal's two ends: its job on the node (keystrokes, resizes and signals go in as job input; the screen
 * comes back as output) and its caller's WebSocket (binary frames both ways for the bytes, JSON text frames for
 * the rest). Both directions are bounded in memory wherever the job runs:
 * - out: screen output the caller's connection has not taken (above 1 MiB) makes the job's output wait, which
 *   holds the node back (its pty pauses), through the relay when another process holds the node's channel;
 * - in: at most TERMINAL_INPUT_WINDOW bytes of input are on their way unacknowledged (the node acknowledges what
 *   its terminal took); past it the caller's connection is paused, so TCP holds the caller back.
 * The terminal ends when its shell exits, when the caller goes (`close`), when idle or at its time limit: the
 * caller gets an `exit` frame (with the receipt) and a normal close, or an `error` frame and close 1011.
 */
export class TerminalLink {
  readonly abort = new AbortController();
  readonly ready: Promise<void>;
  /** When the caller last typed or got output (clock ms): what the idle limit counts from. */
  lastActivity: number;
  private markReady!: () => void;
  private jobId: string | null = null;
  private ws: WebSocket | null = null;
  private callerLeft = false;
  /** Screen output before the caller's connection is attached, and the node's outputs waiting for that. */
  private early: Buffer[] = [];
  private room: Array<() => void> = [];
  private seq = 0;
  private unacked: Array<{ seq: number; bytes: number }> = [];
  private inflight = 0;
  private paused = false;
  private closing: 'closed' | 'idle' | null = null;
  private closeTimer: NodeJS.Timeout | undefined;
  /** The last frame and close, once the job ended (sent when the caller's connection is attached, if not yet). */
  private final: { frame: Frame; code: number; why: string } | null = null;

  constructor(
    private readonly input: (jobId: string, seq: number, input: TerminalInput) => boolean,
    private readonly now: () => number,
  ) {
    this.lastActivity = now();
    this.ready = new Promise((r) => (this.markReady = r));
  }

  /** The job went to its node: input may go. */
  sent(jobId: string): void {
    this.jobId = jobId;
    if (this.closing) this.input(jobId, this.seq++, { type: 'close', reason: this.closing });
  }

  /** One output of the job: an event (ready, ack) or screen output; a promise holds the node back. */
  fromNode(o: JobOutput): void | Promise<void> {
    if (o.stream === 'data') {
      let ev: ReturnType<typeof TerminalEvent.safeParse>;
      try {
        ev = TerminalEvent.safeParse(JSON.parse(o.data));
      } catch {
        return;
      }
      if (!ev.success) return;
      if (ev.data.type === 'ready') this.markReady();
      else this.acked(ev.data.seq);
      return;
    }
    this.lastActivity = this.now();
    if (this.callerLeft) return;
    const buf = Buffer.from(o.data, 'utf8');
    if (!this.ws) {
      this.early.push(buf);
      return new Promise((r) => this.room.push(r));
    }
    return this.send(buf);
  }

  /** The caller's WebSocket, once upgraded: `hello` goes first, then the screen output so far. */
  attach(ws: WebSocket, hello: Frame): void {
    this.ws = ws;
    ws.on('error', () => undefined);
    ws.on('message', (data, isBinary) => this.fromCaller(data, isBinary));
    ws.on('close', () => this.callerGone());
    ws.send(JSON.stringify({ type: 'ready', ...hello }));
    for (const b of this.early.splice(0)) ws.send(b, { binary: true });
    this.release();
    if (this.final) this.finish(this.final);
  }

  /** The caller's connection is gone (or never came): the terminal is closed. */
  callerGone(): void {
    this.callerLeft = true;
    this.early = [];
    this.release();
    this.close('closed');
  }

  /** Ends the terminal: its processes are killed on the node, and the job ends with the seconds it was open. */
  close(reason: 'closed' | 'idle'): void {
    if (this.final || this.closing) return;
    this.closing = reason;
    if (this.jobId !== null) this.input(this.jobId, this.seq++, { type: 'close', reason });
    this.closeTimer = setTimeout(() => this.abort.abort('the node did not end the terminal'), CLOSE_GRACE_MS);
    this.closeTimer.unref();
  }

  /** The job ended and was settled: the exit frame, with its receipt, then a normal close. */
  exited(out: { result: RunResult; receipt: SignedReceipt }): void {
    const r = out.result;
    const reason = (out.receipt.payload.detail as { reason?: string } | undefined)?.reason ?? 'exited';
    this.finish({ frame: { type: 'exit', code: r.exit_code, reason, duration_ms: r.duration_ms, cost_micro_usd: r.cost_micro_usd, receipt: r.receipt }, code: 1000, why: reason });
  }

  /** The job failed (node lost, the process stopping): an error frame, then close 1011. */
  failed(e: unknown): void {
    const error = e instanceof ServiceError ? { type: e.type, message: e.message, ...e.extra } : { type: 'internal_error', message: 'Internal error' };
    this.finish({ frame: { type: 'error', error }, code: 1011, why: error.type });
  }

  private finish(f: { frame: Frame; code: number; why: string }): void {
    clearTimeout(this.closeTimer);
    this.final = f;
    const ws = this.ws;
    if (!ws || ws.readyState !== ws.OPEN) return;
    if (this.paused) ws.resume();
    ws.send(JSON.stringify(f.frame));
    ws.close(f.code, f.why.slice(0, 120));
  }

  private send(buf: Buffer): void | Promise<void> {
    const ws = this.ws!;
    if (ws.readyState !== ws.OPEN) return;
    ws.send(buf, { binary: true }, () => this.drained());
    if (ws.bufferedAmount <= SEND_HIGH) return;
    return new Promise((r) => this.room.push(r));
  }

  private drained(): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== ws.OPEN || ws.bufferedAmount <= SEND_LOW) this.release();
  }

  /** The node's outputs that wait for the caller go on. */
  private release(): void {
    for (const r of this.room.splice(0)) r();
  }

  private fromCaller(data: RawData, isBinary: boolean): void {
    if (this.final || this.closing) return;
    this.lastActivity = this.now();
    if (isBinary) {
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      for (let i = 0; i < buf.length; i += TERMINAL_INPUT_CHUNK) {
        const chunk = buf.subarray(i, i + TERMINAL_INPUT_CHUNK);
        this.toNode({ type: 'data', data_b64: chunk.toString('base64') }, chunk.length);
      }
      return;
    }
    let frame: ReturnType<typeof CallerFrame.safeParse> | undefined;
    try {
      frame = CallerFrame.safeParse(JSON.parse(String(data)));
    } catch {
      frame = undefined;
    }
    if (!frame?.success) {
      this.ws?.close(1008, 'text frames are JSON: {"type":"resize","cols","rows"} or {"type":"signal","name"}');
      return;
    }
    this.toNode(frame.data, CONTROL_BYTES);
  }

  private toNode(i: TerminalInput, bytes: number): void {
    if (this.jobId === null) return;
    const seq = this.seq++;
    this.input(this.jobId, seq, i);
    this.unacked.push({ seq, bytes });
    this.inflight += bytes;
    if (this.inflight >= TERMINAL_INPUT_WINDOW && !this.paused && this.ws) {
      this.paused = true;
      this.ws.pause();
    }
  }

  /** The node took the input up to `seq`: the window opens again (the caller's connection goes on at half of it). */
  private acked(seq: number): void {
    while (this.unacked.length > 0 && this.unacked[0]!.seq <= seq) this.inflight -= this.unacked.shift()!.bytes;
    if (this.paused && this.inflight <= TERMINAL_INPUT_WINDOW / 2) {
      this.paused = false;
      this.ws?.resume();
    }
  }
}
