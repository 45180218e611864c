import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { CreateBody, CreatedRelay, IdParams, ObjectBody, ObjectParams, OpenBody, OpenedRelay, RelayView, SecretParams } from './schemas.ts';
import { CREATE_BODY_LIMIT, MAX_OBJECT_BYTES, MAX_OBJECTS, MAX_TOTAL_BYTES, type RelaysService } from './service.ts';
import { LIST_CAP } from './store.ts';

/** What a view-only object may do in a browser: show itself, nothing else (no scripts, no requests, sandboxed). */
const VIEW_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox";
const DOWNLOAD_CSP = "default-src 'none'; sandbox";

/** Relays (spec: agents): create, list and revoke with a session; open and fetch by the link secret. */
export function relaysRoutes(app: FastifyInstance, relays: RelaysService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['relays'];
  const session = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/relays',
    {
      config: session,
      bodyLimit: CREATE_BODY_LIMIT,
      schema: {
        tags,
        summary: `Create a sealed temporary share of 1-${MAX_OBJECTS} objects (at most ${MAX_OBJECT_BYTES} bytes each, ${MAX_TOTAL_BYTES} in all) with an expiry, an access cap, an optional PIN and a view-only flag; the share_url (carrying the link secret) is shown once`,
        body: CreateBody,
        response: { 201: CreatedRelay },
      },
    },
    async (req, reply) => reply.code(201).send(await relays.create(me(req), req.body)),
  );

  r.get(
    '/v1/relays',
    { config: session, schema: { tags, summary: `The ${LIST_CAP} most recent relays, metadata only: status, access counts, sizes`, response: { 200: z.object({ relays: z.array(RelayView) }) } } },
    async (req) => relays.list(me(req)),
  );

  r.post(
    '/v1/relays/:id/revoke',
    { config: session, schema: { tags, summary: 'Revoke: the ciphertext is destroyed at once; the link then answers 404; idempotent', params: IdParams, response: { 200: RelayView } } },
    async (req) => relays.revoke(me(req), req.params.id),
  );

  r.post(
    '/v1/relay-access/:secret',
    {
      config: { auth: 'public' }, // the link secret in the path, checked in the handler
      schema: {
        tags,
        summary:
          'Open a relay by its link secret (body {pin?}): one access counted, a short-lived grant and the objects listed. Expired, revoked, used-up, locked and unknown links answer the same 404; a wrong PIN is 403 with the attempts left, and the last one locks the relay',
        params: SecretParams,
        body: OpenBody.default({}),
        response: { 200: OpenedRelay },
      },
    },
    async (req) => relays.open(req.params.secret, req.body.pin),
  );

  r.post(
    '/v1/relay-access/:secret/objects/:id',
    {
      config: { auth: 'public' }, // the link secret in the path, checked in the handler
      schema: {
        tags,
        summary:
          "Fetch one object's bytes with the grant of an open. View-only relays serve only image/* and text/* inline; others as attachments; always nosniff, no-store and a restrictive CSP. A dead link or grant is the same 404",
        params: ObjectParams,
        body: ObjectBody,
      },
    },
    async (req, reply) => {
      const o = await relays.object(req.params.secret, req.params.id, req.body.grant);
      const filename = encodeURIComponent(o.name);
      return reply
        .headers({
          'content-type': o.contentType,
          'content-disposition': `${o.viewOnly ? 'inline' : 'attachment'}; filename*=UTF-8''${filename}`,
          'x-content-type-options': 'nosniff',
          'content-security-policy': o.viewOnly ? VIEW_CSP : DOWNLOAD_CSP,
          'cache-control': 'no-store',
          'referrer-policy': 'no-referrer',
          'x-svc-object-sha256': o.sha256,
        })
        .send(o.bytes);
    },
  );
}
