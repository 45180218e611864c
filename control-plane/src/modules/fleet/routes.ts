import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HEARTBEAT_SECONDS, HeartbeatBody, NODE_KINDS } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import type { NodeRegistry } from '../../fleet/registry.ts';

const ModelId = z.string().min(1).max(200);
const EnrollBody = z
  .object({
    name: z.string().trim().min(1).max(100).optional(),
    kinds: z.array(z.enum(NODE_KINDS)).min(1).max(2),
    models: z.array(ModelId).max(200).optional().describe('Public model ids an inference node serves.'),
    model_map: z.record(ModelId, ModelId).optional().describe("Public model id -> the node's local model name."),
    speed_factor: z.number().min(0.01).max(1000).optional().describe('Declared speed relative to the reference node (1.0).'),
  })
  .strict();

const PublicNode = z.object({
  id: z.string(),
  type: z.literal('node'),
  name: z.string().nullable(),
  kinds: z.array(z.string()),
  models: z.array(z.string()),
  speed_factor: z.number(),
  clamp_count: z.number(),
  status: z.enum(['online', 'offline', 'draining', 'disabled', 'pending_approval']),
  reliability: z.number().nullable().describe('Share of finished jobs that ended well: succeeded / (succeeded + failed, timed out or lost); jobs the caller canceled do not count. Null before any.'),
  jobs_dispatched: z.number(),
  latency_ms: z.number().nullable().describe('Moving average of dispatch round-trip latency.'),
  last_heartbeat_at: z.string().nullable(),
});
const OwnerNode = PublicNode.extend({
  approved: z.boolean(),
  disabled: z.boolean(),
  draining: z.boolean(),
  house: z.boolean(),
  key_prefix: z.string(),
  model_map: z.record(z.string(), z.string()),
  declared_speed_factor: z.number(),
  endpoint: z.string().nullable(),
  capabilities: z.unknown(),
  agent_version: z.string().nullable(),
  running_jobs: z.number().describe('Jobs the node reported running at its last heartbeat (its load).'),
  created_at: z.string(),
});
const Enrolled = z.object({ node: OwnerNode, node_key: z.string().describe('The nk-svc_ node key; shown once, stored as sha256.') });
const Registry = z.array(
  z.union([
    z.object({ id: z.literal('gateway'), type: z.literal('gateway'), name: z.string(), status: z.literal('online'), version: z.string() }),
    z.object({ id: z.literal('tee'), type: z.literal('tee_backend'), configured: z.literal(false), attested: z.literal(false), status: z.literal('not_configured') }),
    PublicNode,
  ]),
);

/** Whether an Accept-Encoding header takes gzip (not refused with q=0). */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  const value = Array.isArray(header) ? header.join(',') : (header ?? '');
  return value.split(',').some((part) => {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (name !== 'gzip' && name !== '*') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

export function fleetRoutes(app: FastifyInstance, deps: { registry: NodeRegistry; version: string }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['fleet'];

  r.post(
    '/v1/nodes/enroll',
    { config: { auth: 'session' }, schema: { tags, summary: 'Enroll a node; the nk-svc_ key is revealed once. An admin approves it before it takes work', body: EnrollBody, response: { 201: Enrolled } } },
    async (req, reply) => reply.code(201).send(await deps.registry.enroll(requireSession(req).accountId, req.body)),
  );

  r.post(
    '/v1/nodes/heartbeat',
    {
      config: { auth: 'node' },
      schema: {
        tags,
        summary: `Node heartbeat every ${HEARTBEAT_SECONDS} s: capabilities, endpoint, load, agent version`,
        body: HeartbeatBody,
        response: { 200: z.object({ node_id: z.string(), approved: z.boolean(), disabled: z.boolean(), draining: z.boolean(), next_heartbeat_seconds: z.number(), received_at: z.string() }) },
      },
    },
    async (req) => {
      if (req.principal.kind !== 'node') throw new Error('route is not node-authenticated');
      return deps.registry.heartbeat(req.principal.nodeId, req.body);
    },
  );

  r.get(
    '/v1/nodes',
    { config: { auth: 'public' }, schema: { tags, summary: 'Node registry: the gateway, TEE backends, enrolled nodes (bare array; no secrets, no operator data)', response: { 200: Registry } } },
    async (req, reply) => {
      const head: z.infer<typeof Registry> = [
        { id: 'gateway' as const, type: 'gateway' as const, name: 'svc gateway', status: 'online' as const, version: deps.version },
        { id: 'tee' as const, type: 'tee_backend' as const, configured: false as const, attested: false as const, status: 'not_configured' as const },
      ];
      // The enrolled nodes come kept serialized (registry.publicList: at most a second old, or as this process's
      // last write left them) and are written as built (typed by the schema above): checking every node of a
      // large fleet against the schema on the way out cost more than reading them. gzip when the caller takes it.
      reply.type('application/json; charset=utf-8').header('vary', 'accept-encoding');
      if (acceptsGzip(req.headers['accept-encoding'])) return reply.header('content-encoding', 'gzip').send((await deps.registry.publicList.gzip(head)) as never);
      return reply.send((await deps.registry.publicList.json(head)) as never);
    },
  );

  r.get(
    '/v1/nodes/mine',
    { config: { auth: 'session' }, schema: { tags, summary: "The account's own nodes as their owner sees them: gates, approval, load, capabilities (bare array)", response: { 200: z.array(OwnerNode) } } },
    async (req) => deps.registry.listOwned(requireSession(req).accountId),
  );

  r.post(
    '/v1/nodes/:id/:gate',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Owner gate: disabled (takes no work) or draining (finishes running work, takes none)',
        params: z.object({ id: z.string().max(64), gate: z.enum(['disabled', 'draining']) }),
        body: z.object({ set: z.boolean() }).strict(),
        response: { 200: OwnerNode },
      },
    },
    async (req) => deps.registry.setGate(requireSession(req).accountId, req.params.id, req.params.gate, req.body.set),
  );

  r.post(
    '/v1/admin/nodes/enroll',
    { config: { auth: 'admin' }, schema: { tags, summary: 'Enroll a house node under the house-ops account', body: EnrollBody, response: { 201: Enrolled } } },
    async (req, reply) => reply.code(201).send(await deps.registry.enroll('', req.body, true)),
  );

  r.post(
    '/v1/admin/nodes/gate',
    {
      config: { auth: 'admin' },
      schema: {
        tags,
        summary: 'Admin gate on any node, house nodes included: disabled (takes no work) or draining (finishes running work, takes none)',
        body: z.object({ node_id: z.string().min(1).max(64), gate: z.enum(['disabled', 'draining']), set: z.boolean() }).strict(),
        response: { 200: OwnerNode },
      },
    },
    async (req) => deps.registry.setGate(null, req.body.node_id, req.body.gate, req.body.set),
  );

  r.get(
    '/v1/admin/nodes',
    { config: { auth: 'admin' }, schema: { tags, summary: 'Every enrolled node as its owner sees it, house nodes included: approval, gates, load (bare array)', response: { 200: z.array(OwnerNode) } } },
    async () => deps.registry.listAll(),
  );

  r.post(
    '/v1/admin/nodes/approve',
    {
      config: { auth: 'admin' },
      schema: { tags, summary: 'Approve or un-approve a node for scheduling', body: z.object({ node_id: z.string().max(64), approved: z.boolean() }).strict(), response: { 200: OwnerNode } },
    },
    async (req) => deps.registry.approve(req.body.node_id, req.body.approved),
  );
}
