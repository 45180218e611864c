import { ServiceError, type Clock, type ExecResult, type JobOutput } from '@svc/shared';
import type { CallerSignal } from '../../http/caller-signal.ts';

/** A program's end as its node reports it, or (`measured`) as the gateway saw it when the node reported nothing. */
export type Ran = ExecResult & { measured?: boolean };

/**
 * Follows one run or exec for its caller's leaving: when the caller left (by the clock), when and where its job
 * went out, and how much output was relayed. The node reports what a stopped program ran (ExecResult.canceled);
 * when it reports nothing (it went away, or its agent predates that report), `seen` is the program's end as the
 * gateway saw it: the seconds between the job's sending and the caller's leaving.
 */
export class CallerLeaving {
  private leftAt: number | null = null;
  private sentAt: number | null = null;
  private nodeId: string | null = null;
  private readonly bytes = { stdout: 0, stderr: 0 };
  private readonly onAbort = () => {
    this.leftAt ??= this.clock.now().getTime();
  };

  constructor(
    private readonly signal: CallerSignal,
    private readonly clock: Clock,
  ) {
    if (signal.aborted) this.onAbort();
    else signal.addEventListener('abort', this.onAbort, { once: true });
  }

  get left(): boolean {
    return this.leftAt !== null;
  }

  /** The job went out to this node (once more, if it was dispatched again after its node dropped). */
  sent(nodeId: string): void {
    this.sentAt = this.clock.now().getTime();
    this.nodeId = nodeId;
  }

  relayed(o: JobOutput): void {
    if (o.stream === 'stdout' || o.stream === 'stderr') this.bytes[o.stream] += Buffer.byteLength(o.data, 'utf8');
  }

  /**
   * What ran, as the gateway saw it, for a job that failed (`e`, the hub's error) after its caller left and after it
   * went out; null otherwise (the failure is the caller's to hear, and nothing is charged).
   */
  seen(e: unknown): { r: Ran; nodeId: string } | null {
    if (this.leftAt === null || this.sentAt === null || this.nodeId === null || !(e instanceof ServiceError)) return null;
    const r: Ran = {
      exit_code: null,
      timed_out: false,
      oom_killed: false,
      duration_ms: Math.max(0, this.leftAt - this.sentAt),
      stdout_bytes: this.bytes.stdout,
      stderr_bytes: this.bytes.stderr,
      stdout_truncated: false,
      stderr_truncated: false,
      image_digest: '',
      canceled: 'caller went away',
      measured: true,
    };
    return { r, nodeId: this.nodeId };
  }

  stop(): void {
    this.signal.removeEventListener('abort', this.onAbort);
  }
}
