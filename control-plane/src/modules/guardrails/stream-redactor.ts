import { placeholder, type DirectionPlan, type FindingsLog } from './scanner.ts';
import type { Direction } from './types.ts';

/** Original characters before the pending text that each scan sees again, for the boundary checks of patterns. */
const CONTEXT = 64;
/** A scan waits for at least this many characters beyond the hold-back, so a long answer is not scanned per token. */
export const MIN_EMIT = 32;

/**
 * Redacts a text that arrives in pieces (a streamed answer) as `scanText` redacts it whole, for a match that
 * spans any number of pieces. It holds back only what an undecided match could still need: the plan's
 * hold-back (the longest span a detector must see at once, plus 2) and at most MIN_EMIT characters more; all
 * before that is scanned and passed on.
 *
 * A match that starts before the hold-back is decided: its whole extent is in view, since no match is longer
 * than the hold-back (a token of open length is decided by its first characters and then runs on: the rest
 * of it is swallowed as it arrives, until a character that cannot continue it; a private key block is
 * swallowed until its END line). A blocking match stops the stream: nothing from it on is passed.
 */
export class StreamRedactor {
  private pending = '';
  private context = '';
  private swallow: { tail?: (c: number) => boolean; until?: RegExp; seen: string } | null = null;
  blocked = false;

  constructor(
    private readonly plan: DirectionPlan,
    private readonly log: FindingsLog,
    private readonly direction: Direction,
    private readonly minEmit = MIN_EMIT,
  ) {}

  /** The most characters held back at any moment. */
  get maxHeld(): number {
    return this.plan.holdback + this.minEmit - 1;
  }

  /** What may be passed on now that `piece` arrived ('' while it holds back). */
  push(piece: string): string {
    if (this.blocked || !piece) return '';
    if (this.swallow) {
      piece = this.swallowed(piece);
      if (!piece) return '';
    }
    this.pending += piece;
    if (this.pending.length < this.plan.holdback + this.minEmit) return '';
    return this.drain(false);
  }

  /** The rest, once the text ended. */
  end(): string {
    if (this.blocked) return '';
    this.swallow = null; // a key block or token cut off by the end of the text: already replaced
    return this.pending ? this.drain(true) : '';
  }

  /** Drops what continues a swallowed match; returns what follows it. */
  private swallowed(piece: string): string {
    const s = this.swallow!;
    if (s.tail) {
      let i = 0;
      while (i < piece.length && s.tail(piece.charCodeAt(i))) i++;
      this.context = (this.context + piece.slice(0, i)).slice(-CONTEXT);
      if (i === piece.length) return '';
      this.swallow = null;
      return piece.slice(i);
    }
    const seen = s.seen + piece;
    const m = s.until!.exec(seen);
    if (!m) {
      s.seen = seen.slice(-CONTEXT);
      return '';
    }
    const after = m.index + m[0].length;
    this.context = seen.slice(Math.max(0, after - CONTEXT), after);
    this.swallow = null;
    return seen.slice(after);
  }

  private drain(final: boolean): string {
    const text = this.context + this.pending;
    const off = this.context.length;
    let limit = final ? text.length : text.length - this.plan.holdback;
    const c = text.charCodeAt(limit - 1);
    if (!final && c >= 0xd800 && c <= 0xdbff) limit--; // never split a surrogate pair
    let out = '';
    let pos = off;
    for (const h of this.plan.scan(text)) {
      if (h.start < off) continue; // decided by an earlier scan
      if (h.start >= limit) break; // it may still grow: decided by a later scan
      this.log.add(this.direction, h);
      if (h.action === 'allow') continue;
      out += text.slice(pos, h.start);
      if (h.action === 'block') {
        this.blocked = true;
        this.pending = '';
        return out;
      }
      out += placeholder(h.category);
      pos = h.end;
      if (!final && h.end === text.length && (h.tail || h.until)) {
        this.swallow = h.until ? { until: h.until, seen: '' } : { tail: h.tail!, seen: '' };
        this.context = text.slice(Math.max(0, h.end - CONTEXT), h.end);
        this.pending = '';
        return out;
      }
    }
    if (pos < limit) {
      out += text.slice(pos, limit);
      pos = limit;
    }
    this.context = text.slice(Math.max(0, pos - CONTEXT), pos);
    this.pending = text.slice(pos);
    return out;
  }
}
