import type { FastifyRequest } from 'fastify';

/**
 * Paths that carry a secret (a path token): the part after each prefix is replaced before a request is logged.
 * An agent's hook URL (`/v1/agents/:id/hooks/:token`, not its owner's rotate, disable and secret routes) and an
 * org invite (`/v1/orgs/invites/:token/accept`), a legacy claim link (`/v1/legacy/claim/:token` and its page).
 */
const PATH_TOKENS: RegExp[] = [
  /^(\/v1\/agents\/[^/?#]+\/hooks\/)(?!(?:rotate|disable|secret)(?:[/?#]|$))[^/?#]+/,
  /^(\/v1\/orgs\/invites\/)[^/?#]+/,
  /^(\/(?:v1\/)?legacy\/claim\/)[^/?#]+/, // legacy plans
  /^(\/v1\/relay-access\/)[^/?#]+/, // relays: the link secret
];

/** The URL as a log shows it: path tokens replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  for (const re of PATH_TOKENS) if (re.test(url)) return url.replace(re, '$1[redacted]');
  return url;
}

/** Fastify's request serializer, with the URL redacted (the fields Fastify logs by default). */
function serializeRequest(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactUrl(req.url),
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** Logger options whose request serializer redacts path tokens; `false` (no logging) stays false. */
export function withUrlRedaction(logger: boolean | object): boolean | object {
  if (logger === false) return false;
  const base = (logger === true ? {} : logger) as { serializers?: Record<string, unknown> };
  return { ...base, serializers: { ...base.serializers, req: serializeRequest } };
}
