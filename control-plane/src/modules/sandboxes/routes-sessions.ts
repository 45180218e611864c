import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MAX_FILE_BYTES, SANDBOX_JOBS } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import { runIdOf } from '../../http/run-id.ts';
import type { SandboxDeps } from './deps.ts';
import { respondExec, withIdempotency } from './respond.ts';
import { ExecBody, RunResult, SessionBody, SessionView, SnapshotView } from './schemas.ts';
import { snapshotView } from './sessions.ts';

const Id = z.object({ id: z.string().max(64) });
const cfg = { auth: 'key' as const, scope: 'sandboxes' as const };

export function sandboxSessionRoutes(app: FastifyInstance, d: SandboxDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['sandboxes'];
  const s = d.sessions;

  r.post(
    '/v1/sandboxes/sessions',
    {
      config: cfg,
      schema: { tags, summary: 'Open a persistent session (one container on one node); accepts Idempotency-Key', headers: z.object({ 'idempotency-key': z.string().max(255).optional() }), body: SessionBody.default({}), response: { 201: SessionView } },
    },
    async (req, reply) =>
      withIdempotency(d.idempotency, req, reply, 'POST /v1/sandboxes/sessions', async (record) => {
        const view = await s.create(requireKey(req), req.body);
        reply.code(201);
        await record(view);
        await reply.send(view);
        return view;
      }),
  );

  r.get('/v1/sandboxes/sessions', { config: cfg, schema: { tags, summary: 'Sessions, newest first (100 most recent), metadata only', response: { 200: z.array(SessionView) } } }, async (req) =>
    s.list(requireKey(req).accountId),
  );

  r.get('/v1/sandboxes/sessions/:id', { config: cfg, schema: { tags, summary: 'Status, alive seconds, exec count, cost', params: Id, response: { 200: SessionView } } }, async (req) =>
    s.view(await s.row(requireKey(req).accountId, req.params.id)),
  );

  r.delete('/v1/sandboxes/sessions/:id', { config: cfg, schema: { tags, summary: 'Stop a session; idempotent', params: Id, response: { 200: SessionView } } }, async (req) =>
    s.stop(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/sandboxes/sessions/:id/exec',
    {
      config: { ...cfg, billable: true },
      schema: { tags, summary: 'Run a command in the live workspace; metered per second; stream: true answers with SSE', params: Id, body: ExecBody, response: { 200: RunResult } },
    },
    async (req, reply) => {
      const p = requireKey(req);
      const session = await s.live(p.accountId, req.params.id);
      const b = req.body;
      const timeoutS = d.executor.timeoutSeconds(b);
      const runId = runIdOf(req);
      await respondExec(req, reply, b.stream ?? false, async (ctx) => {
        try {
          const out = await d.executor.execute(
            p,
            b,
            { kind: 'exec', jobKind: SANDBOX_JOBS.sessionExec, payload: { ...d.executor.programPayload(b, timeoutS), session_id: session.id, tty: b.stream === true }, nodeId: session.node_id!, sessionId: session.id, network: session.network },
            { requestId: req.id, runId, resource: new URL(`/v1/sandboxes/sessions/${session.id}/exec`, d.publicUrl).toString(), route: 'POST /v1/sandboxes/sessions/:id/exec', ...ctx },
          );
          await s.recordExec(session.id, out.result.cost_micro_usd);
          return out;
        } catch (e) {
          return s.execFailed(session.id, e);
        }
      });
    },
  );

  r.put(
    '/v1/sandboxes/sessions/:id/files/*',
    {
      config: { ...cfg, rawBody: true, documentedBody: { contentType: 'application/octet-stream', schema: { type: 'string', format: 'binary' } } },
      bodyLimit: MAX_FILE_BYTES,
      schema: {
        tags,
        summary: 'Write one workspace file from the raw body (up to 8 MiB; larger is 413); relayed to the node, not stored',
        params: z.object({ id: z.string().max(64), '*': z.string().max(4096) }),
        response: { 200: z.object({ path: z.string(), bytes: z.number() }) },
      },
    },
    async (req) => {
      const body = req.body;
      const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0);
      return s.writeFile(requireKey(req).accountId, req.params.id, req.params['*'], bytes);
    },
  );

  r.get(
    '/v1/sandboxes/sessions/:id/files/*',
    { config: cfg, schema: { tags, summary: 'Read one workspace file as raw bytes', params: z.object({ id: z.string().max(64), '*': z.string().max(4096) }), response: { 200: z.any().describe('application/octet-stream') } } },
    async (req, reply) => {
      const bytes = await s.readFile(requireKey(req).accountId, req.params.id, req.params['*']);
      return reply.type('application/octet-stream').header('content-length', bytes.length).send(bytes);
    },
  );

  r.get(
    '/v1/sandboxes/sessions/:id/files',
    {
      config: cfg,
      schema: {
        tags,
        summary: 'List a workspace directory',
        params: Id,
        querystring: z.object({ path: z.string().max(4096).default('') }),
        response: { 200: z.object({ path: z.string(), entries: z.array(z.object({ name: z.string(), type: z.string(), size: z.number(), mtime: z.string() })) }) },
      },
    },
    async (req) => s.listFiles(requireKey(req).accountId, req.params.id, req.query.path),
  );

  r.post('/v1/sandboxes/sessions/:id/snapshot', { config: cfg, schema: { tags, summary: 'Snapshot the workspace; the archive stays on its node', params: Id, response: { 201: SnapshotView } } }, async (req, reply) =>
    reply.code(201).send(await s.snapshot(requireKey(req).accountId, req.params.id)),
  );

  r.get('/v1/sandboxes/snapshots', { config: cfg, schema: { tags, summary: 'Your snapshots (100 most recent)', response: { 200: z.array(SnapshotView) } } }, async (req) =>
    s.snapshots(requireKey(req).accountId),
  );

  r.get('/v1/sandboxes/snapshots/:id', { config: cfg, schema: { tags, summary: "One snapshot's metadata", params: Id, response: { 200: SnapshotView } } }, async (req) =>
    snapshotView(await s.getSnapshot(requireKey(req).accountId, req.params.id)),
  );

  r.delete(
    '/v1/sandboxes/snapshots/:id',
    { config: cfg, schema: { tags, summary: 'Delete a snapshot and its archive on the node', params: Id, response: { 200: z.object({ id: z.string(), object: z.literal('sandbox.snapshot'), deleted: z.boolean() }) } } },
    async (req) => s.deleteSnapshot(requireKey(req).accountId, req.params.id),
  );
}
