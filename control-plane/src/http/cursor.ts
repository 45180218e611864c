import { createHmac, timingSafeEqual } from 'node:crypto';
import { ServiceError } from '@svc/shared';

/**
 * Opaque pagination cursors: the position, bound to the route and account that issued it, with an HMAC so
 * a cursor cannot be forged, edited, or replayed against another route or account. Any of those answers
 * 400 `invalid_cursor`; a bad cursor never restarts at page one.
 */
export class Cursors {
  private readonly key: Buffer;
  constructor(secret: Uint8Array) {
    this.key = createHmac('sha256', Buffer.from(secret)).update('svc-cursor-v1').digest();
  }

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, 16);
  }

  encode(route: string, accountId: string, position: number): string {
    const body = Buffer.from(JSON.stringify({ r: route, a: accountId, p: position })).toString('base64url');
    return `${body}.${this.mac(body).toString('base64url')}`;
  }

  decode(route: string, accountId: string, cursor: string): number {
    const bad = () => new ServiceError('invalid_cursor', 'cursor is not one this route issued to you; pass next_cursor back verbatim', { param: 'cursor' });
    const [body, tag] = cursor.split('.');
    if (!body || !tag || cursor.length > 512) throw bad();
    const given = Buffer.from(tag, 'base64url');
    const want = this.mac(body);
    if (given.length !== want.length || !timingSafeEqual(given, want)) throw bad();
    let parsed: { r?: unknown; a?: unknown; p?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw bad();
    }
    if (parsed.r !== route || parsed.a !== accountId || typeof parsed.p !== 'number' || !Number.isSafeInteger(parsed.p)) throw bad();
    return parsed.p;
  }
}
