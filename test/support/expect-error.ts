import { expect } from 'vitest';
import { ApiError } from '@svc/shared/client';
import { ServiceError } from '@svc/shared';

/** Awaits a call that must fail with the given status and error type; returns the ApiError. */
export async function expectApiError(p: Promise<unknown>, status: number, type: string): Promise<ApiError> {
  const e = await p.then(
    () => {
      throw new Error(`expected ${status} ${type}, got success`);
    },
    (err: unknown) => err,
  );
  if (e instanceof ServiceError) {
    // Thrown in-process (a service called directly): same status, type and extra fields as on the wire.
    expect({ status: e.status, type: e.type }).toEqual({ status, type });
    return { status: e.status, type: e.type, message: e.message, param: e.extra.param, body: { error: { type: e.type, message: e.message, ...e.extra } } } as unknown as ApiError;
  }
  expect(e).toBeInstanceOf(ApiError);
  const a = e as ApiError;
  expect({ status: a.status, type: a.type, message: a.message }).toMatchObject({ status, type });
  return a;
}
