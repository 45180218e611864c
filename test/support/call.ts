import type { SvcClient } from '@svc/shared/client';

/** A raw call that returns status and parsed body without throwing, for tests that assert on both. */
export async function call<T = any>(c: SvcClient, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await c.raw(method, path, body === undefined ? {} : { body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
