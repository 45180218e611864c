import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from '../../shared/src/client/generated/openapi.ts';
import { tabGet } from './tab.ts';

/**
 * The console's clients of the public API, typed from the gateway's own OpenAPI document. Same origin: the
 * session rides on the HttpOnly cookie (the browser sends Origin, so the gateway's CSRF check passes), or on a
 * switched org session's bearer token kept for the tab. The key routes take the tab's API key, the admin
 * routes the tab's admin token.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

async function failure(res: Response): Promise<ApiError> {
  const body = (await res
    .clone()
    .json()
    .catch(() => null)) as { error?: { type?: string; message?: string } } | null;
  return new ApiError(res.status, body?.error?.type ?? 'http_error', body?.error?.message ?? `The gateway answered HTTP ${res.status}`, body);
}

const throwOnError: Middleware = {
  async onResponse({ response }) {
    if (!response.ok) throw await failure(response);
    return undefined;
  },
};

function bearer(token: () => string | null): Middleware {
  return {
    onRequest({ request }) {
      const t = token();
      if (t) request.headers.set('authorization', `Bearer ${t}`);
      return request;
    },
  };
}

function client(token: () => string | null) {
  const c = createClient<paths>({ baseUrl: location.origin, credentials: 'same-origin' });
  c.use(bearer(token), throwOnError);
  return c;
}

/** Session routes: the cookie, or the tab's org session. */
export const api = client(() => tabGet('org_session'));
/** Key routes: the tab's API key. */
export const keyApi = client(() => tabGet('api_key'));
/** Admin routes: the tab's admin token. */
export const adminApi = client(() => tabGet('admin_token'));

/** The data of an answer (errors were thrown by the middleware). */
export async function data<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const r = await p;
  return r.data as T;
}

/** A raw same-origin request for what the typed client does not cover (CSV text, streams). */
export async function raw(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const org = tabGet('org_session');
  if (org) headers.set('authorization', `Bearer ${org}`);
  const res = await fetch(path, { credentials: 'same-origin', ...init, headers });
  if (!res.ok) throw await failure(res);
  return res;
}

export type Paths = paths;
type Ok<T> = T extends { responses: { 200: { content: { 'application/json': infer R } } } } ? R : T extends { responses: { 201: { content: { 'application/json': infer R } } } } ? R : never;
/** The JSON of a route's 200 (or 201) answer. */
export type Res<P extends keyof paths, M extends keyof paths[P]> = Ok<paths[P][M]>;
