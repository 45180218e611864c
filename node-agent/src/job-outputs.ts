import type { JobOutput } from '@svc/shared';

/** The most outputs, and characters of output, one message carries (well within the channel's message limit). */
const BATCH_OUTPUTS = 512;
const BATCH_CHARS = 4 * 1024 * 1024;

/**
 * One job's outputs on their way to the control plane, in order, as many per message as gathered while the
 * one before was on its way (one message per output would carry one output per round trip).
 *
 * Backpressure: once a message's worth waits (the control plane is slow to take them, for a slow caller),
 * `emit` returns a promise, resolved when the backlog not yet sent is down to half of that, or on `release`.
 * At most one message is on its way and one message's worth (plus one output) waits.
 */
export class JobOutputs {
  private readonly pending: JobOutput[] = [];
  private chars = 0;
  private seq = 0;
  private room: Array<() => void> = [];
  private pumping = false;
  private flushed: Promise<void> = Promise.resolve();
  /** Some output could not be delivered (the job left a hole in what it produced). */
  undelivered = false;

  constructor(
    private readonly jobId: string,
    /** Sends one message of outputs; false when it could not be delivered. */
    private readonly deliver: (batch: JobOutput[]) => Promise<boolean>,
    /** The backlog went down and the emitters that waited carry on. */
    private readonly onRoom: () => void = () => undefined,
  ) {}

  /** Whether an emitter waits for the backlog to go down. */
  get held(): boolean {
    return this.room.length > 0;
  }

  emit(stream: JobOutput['stream'], data: string): void | Promise<void> {
    this.pending.push({ job_id: this.jobId, seq: this.seq++, stream, data });
    this.chars += data.length;
    if (!this.pumping) this.flushed = this.pump();
    if (this.pending.length < BATCH_OUTPUTS && this.chars < BATCH_CHARS) return undefined;
    return new Promise<void>((r) => this.room.push(r));
  }

  /** Resolves once every output emitted so far was sent (or given up). */
  sent(): Promise<void> {
    return this.flushed;
  }

  /** Lets every waiting emitter go (the job was aborted or ended). */
  release(): void {
    for (const r of this.room.splice(0)) r();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.take();
        // Emitters go on while this message is on its way (the next one fills meanwhile); it is the answer to
        // it, which a slow consumer holds back, that lets the next one go.
        if (this.held && this.pending.length <= BATCH_OUTPUTS / 2 && this.chars <= BATCH_CHARS / 2) {
          this.release();
          this.onRoom();
        }
        if (!(await this.deliver(batch))) this.undelivered = true;
      }
    } finally {
      this.pumping = false; // in the same turn as the loop's last check: an output emitted after it starts a new pump
    }
  }

  /** The oldest outputs waiting, as many as one message carries (at least one). */
  private take(): JobOutput[] {
    let n = 0;
    let chars = 0;
    while (n < this.pending.length && n < BATCH_OUTPUTS && (n === 0 || chars + this.pending[n]!.data.length <= BATCH_CHARS)) chars += this.pending[n++]!.data.length;
    this.chars -= chars;
    return this.pending.splice(0, n);
  }
}
