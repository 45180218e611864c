import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { invalid } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import { etag, parseConditions } from './conditions.ts';
import { DEFAULT_NAMESPACE, STATE_BODY_LIMIT, STATE_KEYS_PER_ACCOUNT, STATE_LIST_CAP, STATE_VALUE_MAX_BYTES } from './names.ts';
import { DeleteHeaders, DeletedView, KeyList, KeyParams, NamespaceQuery, PutBody, ValueView, WriteHeaders, WrittenView } from './schemas.ts';
import type { StateService } from './service.ts';
import type { StateMeta } from './store.ts';

const metaView = (m: StateMeta) => ({
  object: 'state_value' as const,
  key: m.key,
  namespace: m.namespace,
  version: Number(m.version),
  size: m.size,
  created_at: m.created_at.toISOString(),
  updated_at: m.updated_at.toISOString(),
});

/** The namespace of a write: in the body or the query string (both: they must agree). */
function writeNamespace(body: string | undefined, query: string | undefined): string {
  if (body !== undefined && query !== undefined && body !== query) {
    throw invalid(`namespace: the body names ${JSON.stringify(body)} and the query string ${JSON.stringify(query)}; send one`, 'namespace');
  }
  return body ?? query ?? DEFAULT_NAMESPACE;
}

/**
 * Durable state (spec: agents), with an API key (scope `memory`): JSON values under (namespace, key) of the
 * key's account, sealed at rest, versioned for compare-and-set. Delegated keys act on their owner's state.
 */
export function stateRoutes(app: FastifyInstance, state: StateService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['agents'];
  const config = { auth: 'key' as const, scope: 'memory' as const };

  r.put(
    '/v1/state/:key',
    {
      config: { ...config, tooLargeHint: `a value is at most ${STATE_VALUE_MAX_BYTES} bytes of canonical JSON` },
      bodyLimit: STATE_BODY_LIMIT,
      schema: {
        tags,
        summary: `Write a JSON value at a key (sealed at rest): 201 when the key was absent, 200 when replaced; the answer carries the new version, also as ETag. If-Match: <version> or * refuses a stale or absent write with 412 naming the current version; If-None-Match: * creates only. At most ${STATE_KEYS_PER_ACCOUNT} keys per account (409 beyond)`,
        params: KeyParams,
        querystring: NamespaceQuery,
        headers: WriteHeaders,
        body: PutBody,
        response: { 200: WrittenView, 201: WrittenView },
      },
    },
    async (req, reply) => {
      const cond = parseConditions(req.headers, true);
      const place = { accountId: requireKey(req).accountId, namespace: writeNamespace(req.body.namespace, req.query.namespace), key: req.params.key };
      const { created, meta } = await state.put(place, req.body.value, cond);
      return reply
        .code(created ? 201 : 200)
        .header('etag', etag(Number(meta.version)))
        .send({ ...metaView(meta), created });
    },
  );

  r.get(
    '/v1/state/:key',
    {
      config,
      schema: { tags, summary: 'Read one value with its version (also as ETag); 404 when absent', params: KeyParams, querystring: NamespaceQuery, response: { 200: ValueView } },
    },
    async (req, reply) => {
      const { meta, value } = await state.get({ accountId: requireKey(req).accountId, namespace: req.query.namespace ?? DEFAULT_NAMESPACE, key: req.params.key });
      return reply.header('etag', etag(Number(meta.version))).send({ ...metaView(meta), value });
    },
  );

  r.get(
    '/v1/state',
    {
      config,
      schema: {
        tags,
        summary: `The keys of one namespace without values, in byte order: complete up to ${STATE_LIST_CAP}; a namespace holding more is listed truncated (truncated: true, count gives all)`,
        querystring: NamespaceQuery,
        response: { 200: KeyList },
      },
    },
    async (req) => {
      const namespace = req.query.namespace ?? DEFAULT_NAMESPACE;
      const { rows, count, truncated } = await state.list(requireKey(req).accountId, namespace);
      return {
        keys: rows.map((m) => ({ key: m.key, version: Number(m.version), size: m.size, updated_at: m.updated_at.toISOString() })),
        namespace,
        count,
        truncated,
        cap: STATE_LIST_CAP as typeof STATE_LIST_CAP,
      };
    },
  );

  r.delete(
    '/v1/state/:key',
    {
      config,
      schema: {
        tags,
        summary: 'Delete one value; 404 when absent. If-Match: <version> deletes only that version (412 otherwise)',
        params: KeyParams,
        querystring: NamespaceQuery,
        headers: DeleteHeaders,
        response: { 200: DeletedView },
      },
    },
    async (req) => {
      const cond = parseConditions(req.headers, false);
      const meta = await state.delete({ accountId: requireKey(req).accountId, namespace: req.query.namespace ?? DEFAULT_NAMESPACE, key: req.params.key }, cond);
      return { object: 'state_value' as const, key: meta.key, namespace: meta.namespace, version: Number(meta.version), deleted: true as const };
    },
  );
}
