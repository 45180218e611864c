import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { RECEIPT_HEADER_DOCS } from '@svc/shared';
import type { AuthScheme } from './auth-types.ts';
import { WILDCARD_PARAM } from './errors.ts';

const SECURITY: Record<AuthScheme, Array<Record<string, string[]>>> = {
  public: [],
  key: [{ apiKey: [] }],
  session: [{ session: [] }, { sessionCookie: [] }],
  admin: [{ adminToken: [] }],
  metrics: [{ metricsToken: [] }],
  node: [{ nodeKey: [] }],
  path_token: [],
  payment: [{ payment: [] }],
};

const ERROR_SCHEMA = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'message'],
      properties: {
        type: { type: 'string', description: 'Stable error type; clients branch on it.' },
        message: { type: 'string' },
        param: { type: 'string', description: 'The request field at fault, when one is.' },
        request_id: { type: 'string' },
      },
      additionalProperties: true,
    },
  },
};

/**
 * The 402 of a metered route: the error envelope; for `insufficient_credit` it carries x402 version 1 payment
 * terms inside `error` (paid by a deposit, so not an x402 PaymentRequired document: that is the invoke route's 402).
 */
const PAYMENT_REQUIRED_SCHEMA = {
  type: 'object',
  description: "The error envelope of a metered 402. For insufficient_credit, error carries x402 version 1 terms (x402Version, accepts): pay the treasury, then POST /v1/billing/deposits. A marketplace invoke's 402 is an x402 PaymentRequired instead (see that route).",
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'message'],
      properties: {
        type: { type: 'string', enum: ['insufficient_credit', 'spend_cap_reached', 'circuit_breaker_tripped'] },
        message: { type: 'string' },
        x402Version: { type: 'integer', const: 1 },
        accepts: {
          type: 'array',
          description: 'Present only when type is insufficient_credit.',
          items: {
            type: 'object',
            required: ['scheme', 'network', 'maxAmountRequired', 'resource', 'description', 'mimeType', 'payTo', 'asset', 'maxTimeoutSeconds'],
            properties: {
              scheme: { type: 'string' },
              network: { type: 'string' },
              maxAmountRequired: { type: 'string', description: 'Token base units, as a decimal string.' },
              resource: { type: 'string' },
              description: { type: 'string' },
              mimeType: { type: 'string' },
              payTo: { type: 'string', description: 'Treasury address.' },
              asset: { type: 'string', description: 'USDT contract address.' },
              maxTimeoutSeconds: { type: 'integer' },
              extra: { type: 'object', additionalProperties: true },
            },
          },
        },
      },
    },
  },
};

/** Marks an operation whose body may be left out, until the document is assembled (an `x-` key swagger copies). */
const OPTIONAL_BODY = 'x-svc-optional-body';

/** Whether a route's zod body schema takes a request without a body. */
function acceptsNoBody(body: unknown): boolean {
  return typeof (body as { safeParse?: unknown } | undefined)?.safeParse === 'function' && (body as { safeParse(v: unknown): { success: boolean } }).safeParse(undefined).success;
}

/**
 * OpenAPI 3.1 generated from the route schemas. Each operation's security comes from its declared auth
 * scheme; billable operations document the x-svc-* receipt headers and the 402 payment terms.
 */
export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'svc gateway', version, description: 'Metered compute gateway. Paths carry their own /v1 prefix.' },
      servers: [{ url: '/' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'sk-svc_<API_KEY>', description: 'An API key, or an OAuth access token (oat-svc_..., from /v1/oauth/token) with the route\'s scope.' },
          session: { type: 'http', scheme: 'bearer', bearerFormat: 'sess_<SESSION_TOKEN>' },
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'svc_session' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'Admin token; the group answers 404 where none is configured.' },
          metricsToken: { type: 'http', scheme: 'bearer', description: 'Metrics token; /metrics answers 404 where none is configured.' },
          nodeKey: { type: 'http', scheme: 'bearer', bearerFormat: 'nk-svc_<NODE_KEY>' },
          payment: { type: 'apiKey', in: 'header', name: 'X-PAYMENT' },
        },
        schemas: { Error: ERROR_SCHEMA, PaymentRequired: PAYMENT_REQUIRED_SCHEMA },
        headers: Object.fromEntries(
          Object.entries(RECEIPT_HEADER_DOCS).map(([name, description]) => [name, { description, schema: { type: 'string' } }]),
        ),
      },
    } as never,
    // @fastify/swagger marks every request body required; one its route takes as optional is not.
    transformObject: (doc) => {
      const paths = ('openapiObject' in doc ? doc.openapiObject.paths : undefined) ?? {};
      for (const item of Object.values(paths) as Array<Record<string, any>>) {
        for (const op of Object.values(item)) {
          if (!op || typeof op !== 'object' || !(OPTIONAL_BODY in op)) continue;
          delete op[OPTIONAL_BODY];
          if (op.requestBody) op.requestBody.required = false;
        }
      }
      return 'openapiObject' in doc ? doc.openapiObject : doc.swaggerObject;
    },
    transform: (input) => {
      const out = jsonSchemaTransform(input as never) as { schema: Record<string, any>; url: string };
      const cfg = (input.route as { config?: { auth?: AuthScheme; billable?: boolean; scope?: string; documentedBody?: { contentType: string; schema: Record<string, unknown> } } }).config ?? {};
      const schema = { ...out.schema };
      if (cfg.documentedBody) {
        schema.body = cfg.documentedBody.schema;
        schema.consumes = [cfg.documentedBody.contentType];
      } else if (schema.body && acceptsNoBody((input.schema as { body?: unknown } | undefined)?.body)) {
        schema[OPTIONAL_BODY] = true; // the request may leave the body out (see requestValidator)
      }
      schema.security = SECURITY[cfg.auth ?? 'public'];
      if (cfg.scope) schema['x-svc-scope'] = cfg.scope;
      const responses: Record<string, any> = { ...(schema.response ?? {}) };
      if (cfg.billable) {
        for (const [code, r] of Object.entries(responses)) {
          if (code.startsWith('2')) {
            responses[code] = {
              ...r,
              headers: Object.fromEntries(Object.keys(RECEIPT_HEADER_DOCS).map((h) => [h, { $ref: `#/components/headers/${h}` }])),
            };
          }
        }
        responses['402'] = { description: 'Payment required', content: { 'application/json': { schema: { $ref: '#/components/schemas/PaymentRequired' } } } };
      }
      if (Object.keys(responses).length) schema.response = responses;
      // A trailing wildcard is the `path` parameter in the document (the spec writes it `*path`), as in errors.
      if (out.url.endsWith('/*') && schema.params?.properties?.['*']) {
        const { '*': wildcard, ...rest } = schema.params.properties;
        schema.params = { ...schema.params, properties: { ...rest, [WILDCARD_PARAM]: wildcard }, required: [...(schema.params.required ?? []).filter((n: string) => n !== '*'), WILDCARD_PARAM] };
        return { schema, url: `${out.url.slice(0, -1)}{${WILDCARD_PARAM}}` };
      }
      return { schema, url: out.url };
    },
  });
}
