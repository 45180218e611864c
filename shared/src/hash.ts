import { hash, timingSafeEqual } from 'node:crypto';

/** The one-shot `crypto.hash` (Node 20.12+): several times cheaper than a Hash object for one digest. */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/** The same digest as 0x-prefixed hex, as the public records (hash chains, evidence, documents) print it. */
export function sha256Hex0x(data: string | Uint8Array): string {
  return `0x${sha256Hex(data)}`;
}

/** Constant-time comparison of two hex digests of equal length. */
export function digestEquals(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}
