import type { ServerResponse } from 'node:http';

/**
 * What a call needs of its caller's lifetime: whether the caller went away (and why), and a way to hear
 * when it does. An AbortSignal is one; `callerGone` below is a cheaper one for an HTTP caller.
 */
export interface CallerSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

const GONE = Symbol('callerGone');
type Tracked = ServerResponse & { [GONE]?: ReplyGone };

/**
 * Aborts when the response closes before it was ended. A plain object with a listener list: an
 * AbortController per request (an EventTarget) cost about 2% of the event loop at high request rates.
 */
class ReplyGone implements CallerSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) l();
  }
}

function onClose(this: Tracked): void {
  if (!this.writableEnded) this[GONE]?.abort(new Error('caller went away'));
}

/** The caller of this response went away: the response closed before it was ended. One per response. */
export function callerGone(res: ServerResponse): CallerSignal {
  const tracked = res as Tracked;
  let gone = tracked[GONE];
  if (!gone) {
    gone = tracked[GONE] = new ReplyGone();
    res.once('close', onClose);
  }
  return gone;
}
