import { gzip } from 'node:zlib';
import { promisify } from 'node:util';
import type { Clock } from '@svc/shared';

const gzipAsync = promisify(gzip);

/** How old the kept answer of the public node list may be when a write it does not follow was made (see PublicListCache). */
export const PUBLIC_LIST_MAX_AGE_MS = 1000;

interface Body {
  /** The nodes' JSON array. */
  json: string;
  /** The answer with the entries before the nodes (`head`), as text and as gzip, made once per body when first asked. */
  full: { head: string; text: string; gzip: Promise<Buffer> | null } | null;
}

/**
 * The public node list kept serialized, so that callers of a large fleet's `GET /v1/nodes` do not each read and
 * write every node: built once, answered to every caller until it is `maxAgeMs` old (by the clock) or
 * `invalidate`d. This process's registry writes that change what the list shows invalidate it (enrollment,
 * gates, approval, job outcomes, a heartbeat that brings a node online); a heartbeat of a node already online
 * (its time only) and other processes' writes show within `maxAgeMs`. The gzip of a body is made once, when a
 * caller first takes it (off the event loop).
 *
 * A build under way when the list is invalidated is answered to the callers that asked before, and not kept.
 */
export class PublicListCache {
  private body: { at: number; gen: number; value: Promise<Body> } | null = null;
  private gen = 0;

  constructor(
    private readonly clock: Clock,
    private readonly build: () => Promise<string>,
    private readonly maxAgeMs = PUBLIC_LIST_MAX_AGE_MS,
  ) {}

  invalidate(): void {
    this.gen++;
  }

  private current(): Promise<Body> {
    const now = this.clock.now().getTime();
    const b = this.body;
    if (b && b.gen === this.gen && now - b.at < this.maxAgeMs) return b.value;
    const value = this.build().then((json): Body => ({ json, full: null }));
    const entry = { at: now, gen: this.gen, value };
    this.body = entry;
    value.catch(() => {
      if (this.body === entry) this.body = null;
    });
    return value;
  }

  /** The answer's body: a JSON array of the `head` entries, then every node. */
  private async full(head: readonly unknown[]): Promise<NonNullable<Body['full']>> {
    const b = await this.current();
    const h = JSON.stringify(head);
    if (b.full?.head !== h) {
      const text = b.json.length > 2 ? (head.length ? `${h.slice(0, -1)},${b.json.slice(1)}` : b.json) : h;
      b.full = { head: h, text, gzip: null };
    }
    return b.full;
  }

  /** The answer as JSON text. */
  async json(head: readonly unknown[] = []): Promise<string> {
    return (await this.full(head)).text;
  }

  /** The answer as gzip of that JSON text. */
  async gzip(head: readonly unknown[] = []): Promise<Buffer> {
    const f = await this.full(head);
    f.gzip ??= gzipAsync(f.text);
    return f.gzip;
  }
}
