import { z } from 'zod';
import type { JobHandler } from './types.ts';

/**
 * Diagnostic jobs every node runs: the control plane uses them to measure dispatch latency and to check a
 * node end to end; operators use them to see their agent work. `diag.echo` streams its input back;
 * `diag.wait` holds a job open for a given time (cancellable), emitting `say` first and `then` once the time
 * is up when given, to exercise drains, timeouts, what happens to a job whose output has begun, and output
 * that follows a reconnect.
 */
const Echo = z.object({ chunks: z.array(z.string().max(65536)).max(1000) });
const Wait = z.object({ ms: z.number().int().min(0).max(600_000), say: z.string().max(65536).optional(), then: z.string().max(65536).optional() });

export const echo: JobHandler = async (payload, ctx) => {
  const { chunks } = Echo.parse(payload);
  for (const c of chunks) ctx.emit('data', c);
  return { result: { chunks: chunks.length } };
};

export const wait: JobHandler = async (payload, ctx) => {
  const { ms, say, then } = Wait.parse(payload);
  if (say !== undefined) ctx.emit('data', say);
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    ctx.signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new Error(`canceled: ${String(ctx.signal.reason ?? '')}`));
    });
  });
  if (then !== undefined) ctx.emit('data', then);
  return { result: { waited_ms: ms } };
};
