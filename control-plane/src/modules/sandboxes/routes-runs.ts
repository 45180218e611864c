import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MAX_FILE_BYTES, SANDBOX_JOBS, ServiceError } from '@svc/shared';
import { requireKey, requireSession } from '../../http/auth.ts';
import { runIdOf } from '../../http/run-id.ts';
import type { SandboxDeps } from './deps.ts';
import { respondExec, withIdempotency } from './respond.ts';
import { RunBody, RunHistory, RunResult } from './schemas.ts';
import { SandboxSessions } from './sessions.ts';
import type { RunResult as RunResultT } from './schemas.ts';

/** Output is never stored: an Idempotency-Key replay carries the first result's metadata and receipt only. */
export const withoutOutput = (r: RunResultT) => ({ ...r, stdout: '', stderr: '', replayed: true });

function decodeFiles(files: z.infer<typeof RunBody>['files']) {
  return (files ?? []).map((f, i) => {
    const path = SandboxSessions.checkPath(f.path);
    if (!path) throw new ServiceError('invalid_request', `files[${i}].path: name a file`, { param: `files[${i}].path` });
    if ((f.content === undefined) === (f.content_base64 === undefined)) throw new ServiceError('invalid_request', `files[${i}]: give content or content_base64`, { param: `files[${i}]` });
    const bytes = f.content !== undefined ? Buffer.from(f.content, 'utf8') : Buffer.from(f.content_base64!, 'base64');
    if (bytes.length > MAX_FILE_BYTES) throw new ServiceError('payload_too_large', `files[${i}]: workspace files are limited to ${MAX_FILE_BYTES} bytes`);
    return { path, content_b64: bytes.toString('base64') };
  });
}

export function sandboxRunRoutes(app: FastifyInstance, d: SandboxDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['sandboxes'];

  r.post(
    '/v1/sandboxes',
    {
      config: { auth: 'key', scope: 'sandboxes', billable: true },
      bodyLimit: 16 * 1024 * 1024,
      schema: {
        tags,
        summary: 'Run code once in a fresh sandbox; metered per second; stream: true answers with SSE; optional Idempotency-Key',
        headers: z.object({ 'idempotency-key': z.string().max(255).optional(), 'x-svc-run-id': z.string().max(128).optional() }),
        body: RunBody,
        response: { 200: RunResult },
      },
    },
    async (req, reply) => {
      const p = requireKey(req);
      const b = req.body;
      if (b.network && !d.config.networkAllowed) throw new ServiceError('forbidden', 'network: this deployment does not allow network access from sandboxes');
      const files = decodeFiles(b.files);
      const timeoutS = d.executor.timeoutSeconds(b);
      const runId = runIdOf(req);
      return withIdempotency(
        d.idempotency,
        req,
        reply,
        'POST /v1/sandboxes',
        (record) =>
          respondExec(
            req,
            reply,
            b.stream ?? false,
            (ctx) =>
              d.executor.execute(
                p,
                b,
                { kind: 'run', jobKind: SANDBOX_JOBS.run, payload: { ...d.executor.programPayload(b, timeoutS), files, network: b.network ?? false, limits: d.config.limits }, sessionId: null, network: b.network ?? false },
                { requestId: req.id, runId, resource: new URL('/v1/sandboxes', d.publicUrl).toString(), route: 'POST /v1/sandboxes', ...ctx },
              ),
            record,
          ),
        withoutOutput,
      );
    },
  );

  r.get(
    '/v1/usage/sandboxes',
    { config: { auth: 'session' }, schema: { tags, summary: 'Sandbox run history, newest first (100 most recent); metadata only', response: { 200: z.array(RunHistory) } } },
    async (req) => d.records.list(requireSession(req).accountId),
  );

  r.get(
    '/v1/usage/sandboxes/:id',
    { config: { auth: 'session' }, schema: { tags, summary: 'One sandbox run; metadata only', params: z.object({ id: z.string().max(64) }), response: { 200: RunHistory } } },
    async (req) => d.records.get(requireSession(req).accountId, req.params.id),
  );
}
