/** Hosts on which an `http:` redirect URI is accepted (RFC 8252 §7.3 loopback redirection), with any port. */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

export const MAX_REDIRECT_URI_LENGTH = 2000;

/**
 * What is wrong with a redirect URI offered at registration (or in a Client ID Metadata Document), or null.
 * Accepted: `https:` on any host, and `http:` on a loopback host (127.0.0.1, localhost, [::1]) with any
 * port. Never a fragment (RFC 6749 §3.1.2) or credentials; no other scheme.
 */
export function redirectUriProblem(raw: string): string | null {
  if (raw.length > MAX_REDIRECT_URI_LENGTH) return `longer than ${MAX_REDIRECT_URI_LENGTH} characters`;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'not an absolute URL';
  }
  if (raw.includes('#')) return 'must not contain a fragment (#)';
  if (u.username || u.password) return 'must not carry credentials (user:password@)';
  if (u.protocol === 'https:') return u.hostname ? null : 'needs a host';
  if (u.protocol === 'http:') {
    return LOOPBACK_HOSTS.has(u.hostname) ? null : 'http is allowed only on a loopback host (127.0.0.1, localhost or [::1]); use https';
  }
  return `the ${u.protocol.replace(/:$/, '')} scheme is not allowed; use https, or http on a loopback host`;
}

/**
 * Whether `requested` is one of the `registered` redirect URIs: an exact match, or for a loopback `http:` URI
 * the same host, path and query on any port (RFC 8252 section 7.3: a native app takes whatever port is free
 * when it asks, so the server must allow any port at request time).
 */
export function redirectUriMatches(registered: readonly string[], requested: string): boolean {
  if (registered.includes(requested)) return true;
  const r = loopback(requested);
  if (!r) return false;
  return registered.some((x) => {
    const u = loopback(x);
    return u !== null && u.hostname === r.hostname && u.pathname === r.pathname && u.search === r.search;
  });
}

function loopback(raw: string): URL | null {
  if (raw.includes('#')) return null;
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname) && !u.username && !u.password ? u : null;
  } catch {
    return null;
  }
}
