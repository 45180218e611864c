import type { FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/shared';

/**
 * Cross-site request forgery on cookie sessions. A browser attaches the `svc_session` cookie to requests
 * that other pages make; SameSite=Lax keeps it off cross-site POSTs in current browsers, but not off
 * requests from another origin of the same site (a sibling subdomain, another port on the host). So an
 * unsafe request (anything but GET, HEAD, OPTIONS) whose credential is the cookie must show that this
 * gateway's own pages made it:
 * - `Origin`, when sent, must be the gateway's own (`SVC_PUBLIC_URL`'s origin); `null` is no origin.
 * - Without `Origin`, `Sec-Fetch-Site` must be `same-origin`, or `none`: set only for a request the user
 *   started themself (address bar, bookmark), never for one a page made, and no page can set it.
 * - With neither header nothing vouches for the request: refused. Programs send `Authorization: Bearer`.
 * Requests with a bearer credential carry no ambient authority and are not checked.
 */
export function assertSameOrigin(req: FastifyRequest, publicOrigin: string): void {
  const m = req.method;
  if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return;
  const origin = req.headers.origin;
  if (origin !== undefined ? origin.toLowerCase() === publicOrigin : sameOriginFetch(req.headers['sec-fetch-site'])) return;
  throw new ServiceError(
    'csrf_refused',
    `A request authenticated by the session cookie must come from ${publicOrigin} (its Origin, or Sec-Fetch-Site: same-origin); other clients send Authorization: Bearer sess_...`,
  );
}

function sameOriginFetch(site: string | string[] | undefined): boolean {
  return site === 'same-origin' || site === 'none';
}
