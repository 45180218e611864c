import type { FastifyRequest } from 'fastify';
import { invalid } from '@svc/shared';

/** Callers group requests into a run with this header; each receipt in a run chains the previous one's hash. */
export const RUN_HEADER = 'x-svc-run-id';
const RUN_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function runIdOf(req: FastifyRequest): string | null {
  const v = req.headers[RUN_HEADER];
  if (v === undefined) return null;
  if (typeof v !== 'string' || !RUN_ID.test(v)) throw invalid(`${RUN_HEADER}: 1-128 characters of A-Z a-z 0-9 . _ : -`, RUN_HEADER);
  return v;
}

