import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

/**
 * The spec's route table. The spec lives beside the repository (../shared/spec) in the workspace; a copy in
 * test/fixtures keeps the test runnable from any clone, and must equal the spec wherever the spec is present.
 */
function specRoutes(): string {
  const copy = readFileSync(new URL('./fixtures/routes.tsv', import.meta.url), 'utf8');
  const live = new URL('../../shared/spec/routes.tsv', import.meta.url);
  if (existsSync(live)) expect(readFileSync(live, 'utf8'), 'test/fixtures/routes.tsv differs from shared/spec/routes.tsv: copy the spec again').toBe(copy);
  return copy;
}

/**
 * Routes the gateway serves beyond spec/routes.tsv, each for a stated operational need. Any other route not
 * in the spec fails the check below.
 */
const BEYOND_SPEC: Record<string, { auth: string; why: string }> = {
  'GET /readyz': { auth: 'public', why: 'readiness for load balancers and scripts: 200 once work is taken (with npm start, once the local node agent is connected)' },
  'POST /v1/admin/nodes/gate': { auth: 'admin', why: 'admins drain and disable any node, house nodes included (the owner route takes only the owner\'s session)' },
  'GET /oauth/consent': { auth: 'public', why: 'the OAuth consent page (HTML) that GET /v1/oauth/authorize redirects the browser to; it calls POST /v1/oauth/authorize/approve' },
  'GET /v1/oauth/consents': { auth: 'session', why: 'the account lists the OAuth clients it has authorized, with their scopes' },
  'DELETE /v1/oauth/consents/:id': { auth: 'session', why: 'the account withdraws an OAuth consent: its tokens stop at once' },
  'GET /c/:id': { auth: 'public', why: 'the sealed-call page (HTML) that the spec names beside GET /v1/calls/public/:id; its script verifies the receipt and commitment in the browser' },
  'GET /r/:request_id': { auth: 'public', why: 'the shared-receipt page (HTML) that the spec names beside GET /v1/receipts/shared/:id; its script verifies the signature in the browser' },
  'GET /assets/verify.js': { auth: 'public', why: 'the verification script the public pages load from the gateway\'s own origin (no external assets)' },
  'GET /j/:id': { auth: 'public', why: 'the verdict page (HTML) that the spec names beside GET /v1/judge/public/:id; its script verifies the signed outcome, fingerprints, evidence root and tally in the browser' }, // quality
  'GET /assets/verdict.js': { auth: 'public', why: 'the verdict page\'s verification script, from the gateway\'s own origin (no external assets)' }, // quality
  'GET /v1/mcp': { auth: 'key', why: 'the MCP Streamable HTTP transport defines GET on its endpoint (a server-initiated event stream); it answers 405, as the transport allows, so clients know none is offered' },
  'DELETE /v1/mcp': { auth: 'key', why: 'the MCP Streamable HTTP transport ends a session with DELETE on its endpoint' },
  'GET /v1/mcp/servers/:id': { auth: 'key', why: 'the same transport GET on the MCP gateway endpoint: 405, no server-initiated stream is relayed' },
  'DELETE /v1/mcp/servers/:id': { auth: 'key', why: 'the same transport DELETE on the MCP gateway endpoint: ends the upstream session' },
  'GET /v1/sandboxes/sessions/:id/terminal': { auth: 'key', why: "an interactive terminal into a session over WebSocket (keystrokes, resizes and signals in, screen output out), metered per second as an exec; the spec's streamed exec carries output only" },
  'GET /assets/consent.js': { auth: 'public', why: 'the OAuth consent page\'s script (sign-in in place with a passkey or a browser wallet, then the answer), from the gateway\'s own origin' },
  'GET /console': { auth: 'public', why: 'the web console (HTML): a single-page app built into hashed assets that the gateway serves itself, under a strict CSP; it calls only the public API with the session cookie' }, // console
  'GET /console/*path': { auth: 'public', why: "the console's hashed assets (cached for good) and its client-side routes (the same page, never cached)" }, // console
  'GET /v1/nodes/mine': { auth: 'session', why: "an operator lists their own nodes as their owner sees them (gates, approval, load): the registry is public and shows no owner, and the owner's gate routes need the node ids" }, // console
  'GET /v1/admin/nodes': { auth: 'admin', why: "admins list every node with its approval, gates and house flag, which the public registry does not show (an offline node's gates, a house node)" }, // console
  'GET /legacy/claim/:token': { auth: 'public', why: 'the claim page (HTML) that the spec names beside GET /v1/legacy/claim/:token: plan name, the wallet required, status and how to open it' }, // legacy plans
};

const toOpenApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{path}');
type Doc = { openapi: string; servers: Array<{ url: string }>; paths: Record<string, Record<string, any>>; components: Record<string, any> };

describe('OpenAPI document', () => {
  it('is served at both addresses, is valid OpenAPI 3.1 and declares the bare origin as server', async () => {
    const a = (await (await fetch(`${t.url}/openapi.json`)).json()) as Doc;
    const b = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as Doc;
    expect(b).toEqual(a);
    expect(a.openapi).toBe('3.1.0');
    expect(a.servers).toEqual([{ url: '/' }]);
    const v = new Validator();
    const res = await v.validate(a as never);
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(Object.keys(a.components.securitySchemes).sort()).toEqual(['adminToken', 'apiKey', 'metricsToken', 'nodeKey', 'payment', 'session', 'sessionCookie']);
    expect(Object.keys(a.components.headers)).toEqual(expect.arrayContaining(['x-svc-receipt', 'x-svc-signature']));
    expect(a.components.schemas.PaymentRequired.properties.error.properties.accepts.items.required).toContain('maxAmountRequired');
  });

  it('documents raw bodies: the multipart file upload and the raw workspace file', async () => {
    const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as Doc;
    const upload = doc.paths['/v1/files']!.post.requestBody;
    expect(Object.keys(upload.content)).toEqual(['multipart/form-data']);
    expect(upload.content['multipart/form-data'].schema).toMatchObject({ required: ['purpose', 'file'], properties: { purpose: { enum: ['batch'] }, file: { format: 'binary' } } });
    expect(doc.paths['/v1/sandboxes/sessions/{id}/files/{path}']!.put.requestBody.content).toEqual({ 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } });
  });

  it('lists exactly the routes the router serves, each with its auth', async () => {
    const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as Doc;
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)).sort();
    const routed = t.gw.app.routeTable.filter((r) => !r.hidden).map((r) => `${r.method} ${toOpenApiPath(r.url)}`).sort();
    expect(documented).toEqual(routed);
    const security: Record<string, unknown> = { public: [], key: [{ apiKey: [] }], session: [{ session: [] }, { sessionCookie: [] }], admin: [{ adminToken: [] }], metrics: [{ metricsToken: [] }], node: [{ nodeKey: [] }] };
    for (const r of t.gw.app.routeTable.filter((x) => !x.hidden)) {
      expect(doc.paths[toOpenApiPath(r.url)]?.[r.method.toLowerCase()]?.security, `${r.method} ${r.url}`).toEqual(security[r.auth]);
    }
  });

  it('agrees with spec/routes.tsv on every wired row and reports coverage', async () => {
    const tsv = specRoutes().trim().split('\n').slice(1);
    const group: Record<string, string> = { P: 'public', K: 'key', S: 'session', A: 'admin', M: 'metrics' };
    const spec = new Map(tsv.map((line) => line.split('\t')).map(([m, p, a]) => [`${m} ${p}`, group[a!]]));
    // The router's trailing wildcard `*` is the spec's `*path`.
    const wired = t.gw.app.routeTable.filter((r) => !r.hidden).map((r) => ({ ...r, url: r.url.replace(/\*$/, '*path') }));
    const inSpec = wired.filter((r) => spec.has(`${r.method} ${r.url}`));
    for (const r of inSpec) {
      const expected = spec.get(`${r.method} ${r.url}`);
      // The node heartbeat is listed as public in the table but authenticates with the node key.
      if (r.url !== '/v1/nodes/heartbeat') expect(r.auth, `${r.method} ${r.url}`).toBe(expected);
    }
    const beyond = wired.filter((r) => !spec.has(`${r.method} ${r.url}`));
    expect(beyond.map((r) => `${r.method} ${r.url}`).filter((k) => !(k in BEYOND_SPEC))).toEqual([]);
    for (const r of beyond) expect(r.auth, `${r.method} ${r.url}`).toBe(BEYOND_SPEC[`${r.method} ${r.url}`]!.auth);
    // Each listed route is served (the list names no route that is gone).
    expect(Object.keys(BEYOND_SPEC).filter((k) => !beyond.some((r) => `${r.method} ${r.url}` === k))).toEqual([]);
    console.log(`routes.tsv: ${inSpec.length} of ${spec.size} rows wired`);
  });
});
