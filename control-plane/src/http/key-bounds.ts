import { ServiceError } from '@svc/shared';
import type { KeyAllowList, KeyPrincipal } from './auth-types.ts';

/**
 * Allow lists of keys (mandate keys and every key delegated below one): the models a request may name and
 * the routes it may call. The auth layer checks them on every request of such a key, beside its scope, and
 * work that runs later under a key (batch lines) checks them the same way.
 *
 * A route pattern is `METHOD /v1/path`, or `/v1/path` for any method; the path is a route template as the
 * OpenAPI document lists it (`/v1/sandboxes/sessions/:id/exec`; `{id}` is accepted and stored as `:id`), or
 * a prefix ending in `/*` (`/v1/sandboxes/*`: every route under it).
 */

const PATTERN = /^(?:(GET|POST|PUT|PATCH|DELETE) )?(\/[A-Za-z0-9_\-./:{}*]*)$/;

/** The stored form of a route pattern (`{id}` as `:id`, the method upper-cased), or null when it is not one. */
export function normalizeRoutePattern(raw: string): string | null {
  const s = raw.trim().replace(/^([a-z]+) /i, (_, m: string) => `${m.toUpperCase()} `);
  const m = PATTERN.exec(s);
  if (!m) return null;
  const path = m[2]!.replace(/\{([A-Za-z_]+)\}/g, ':$1');
  if (path.includes('*') && !/^[^*]*\/\*$/.test(path)) return null; // a wildcard only as a final `/*`
  if (path.length > 1 && path.endsWith('/')) return null;
  return m[1] ? `${m[1]} ${path}` : path;
}

/** Whether a normalized pattern admits a route (`url` is the route's template, `method` the request's). */
export function routeMatches(pattern: string, method: string, url: string): boolean {
  const sp = pattern.indexOf(' ');
  const m = sp > 0 ? pattern.slice(0, sp) : null;
  const path = sp > 0 ? pattern.slice(sp + 1) : pattern;
  if (m && m !== (method === 'HEAD' ? 'GET' : method)) return false;
  return path.endsWith('/*') ? url.startsWith(path.slice(0, -1)) : url === path;
}

/** Refuses (403 `route_not_allowed`) a route outside any allow list of the key. */
export function assertRouteAllowed(p: KeyPrincipal, method: string, url: string | undefined): void {
  if (!p.allowLists) return;
  const m = method.toUpperCase();
  for (const l of p.allowLists) {
    if (l.routes && !(url !== undefined && l.routes.some((r) => routeMatches(r, m, url)))) {
      throw new ServiceError('route_not_allowed', `This API key may not call ${m} ${url ?? 'this route'}: its mandate allows only ${l.routes.join(', ')}`, {
        route: `${m} ${url ?? ''}`.trim(),
        allowed_routes: l.routes,
      });
    }
  }
}

/** Refuses (403 `model_not_allowed`) a model outside any allow list of the key. */
export function assertModelAllowed(p: KeyPrincipal, model: string): void {
  if (!p.allowLists) return;
  for (const l of p.allowLists) {
    if (l.models && !l.models.includes(model)) {
      throw new ServiceError('model_not_allowed', `This API key may not use model "${model}": its mandate allows only ${l.models.join(', ')}`, {
        param: 'model',
        model,
        allowed_models: l.models,
      });
    }
  }
}

/** The models a request body names: `model`, and each of `models` (several models asked in one call). */
export function modelsOf(body: unknown): string[] {
  if (!body || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) return [];
  const b = body as { model?: unknown; models?: unknown };
  const out: string[] = [];
  if (typeof b.model === 'string') out.push(b.model);
  if (Array.isArray(b.models)) for (const m of b.models) if (typeof m === 'string') out.push(m);
  return out;
}

/** Both checks, for work run under a key outside an HTTP request of it (a batch line). */
export function assertKeyBounds(p: KeyPrincipal, method: string, url: string, body: unknown): void {
  assertRouteAllowed(p, method, url);
  for (const m of modelsOf(body)) assertModelAllowed(p, m);
}

/** The allow lists of a key chain that carry a list (null when none does). */
export function allowListsOf(rows: ReadonlyArray<{ allowed_models: string[] | null; allowed_routes: string[] | null }>): KeyAllowList[] | undefined {
  const lists = rows.filter((r) => r.allowed_models !== null || r.allowed_routes !== null).map((r) => ({ models: r.allowed_models, routes: r.allowed_routes }));
  return lists.length ? lists : undefined;
}
