/**
 * The protocol errors of the OAuth endpoints: RFC 6749 §5.2 on the token endpoint, RFC 7591 §3.2.2 on
 * registration, RFC 6749 §4.1.2.1 on the authorization redirect. Rendered as `{error, error_description}`,
 * not the gateway's error envelope.
 */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }

  body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

export type Params = Record<string, string>;

/** Longest value accepted for any one parameter (tokens, verifiers and URLs are far shorter). */
const MAX_VALUE = 4096;

/**
 * The parameters of a token or revocation request, whose body is form-encoded (RFC 6749 §4.1.3, the
 * standard) or JSON (an object of strings). A parameter given twice, a non-string JSON value or another
 * content type is `invalid_request`.
 */
export function parseParams(contentType: string | undefined, raw: Buffer | undefined): Params {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const text = raw && raw.length ? raw.toString('utf8') : '';
  if (type === 'application/x-www-form-urlencoded' || (!type && !text)) return fromPairs(new URLSearchParams(text));
  if (type === 'application/json' || /^application\/[\w.+-]+\+json$/.test(type)) {
    if (!text) return Object.create(null) as Params;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new OAuthError('invalid_request', 'The body is not valid JSON');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new OAuthError('invalid_request', 'The JSON body must be an object of string parameters');
    const out: Params = Object.create(null);
    for (const [k, v] of Object.entries(body)) {
      if (typeof v !== 'string') throw new OAuthError('invalid_request', `Parameter ${k} must be a string`);
      out[k] = checked(k, v);
    }
    return out;
  }
  throw new OAuthError('invalid_request', 'Send the parameters as application/x-www-form-urlencoded (or application/json)');
}

/** Query parameters as Fastify parses them: a repeated one arrives as an array and is refused (RFC 6749 §3.1). */
export function singleParams(query: Record<string, unknown>): Params {
  const out: Params = Object.create(null);
  for (const [k, v] of Object.entries(query)) {
    if (Array.isArray(v)) throw new OAuthError('invalid_request', `Parameter ${k} is repeated`);
    if (typeof v === 'string') out[k] = checked(k, v);
  }
  return out;
}

function fromPairs(p: URLSearchParams): Params {
  const out: Params = Object.create(null); // no inherited keys: "constructor" is a parameter like any other
  for (const [k, v] of p) {
    if (k in out) throw new OAuthError('invalid_request', `Parameter ${k} is repeated`);
    out[k] = checked(k, v);
  }
  return out;
}

function checked(k: string, v: string): string {
  if (v.length > MAX_VALUE) throw new OAuthError('invalid_request', `Parameter ${k} is longer than ${MAX_VALUE} characters`);
  if (v.includes('\0')) throw new OAuthError('invalid_request', `Parameter ${k} contains a NUL character`);
  return v;
}

/** Scope strings (RFC 6749 §3.3): space-delimited, deduplicated, in the order given. */
export function splitScope(scope: string | undefined): string[] {
  return [...new Set((scope ?? '').split(' ').filter(Boolean))];
}
