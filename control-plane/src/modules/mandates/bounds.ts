import { invalid } from '@svc/shared';
import type { KeyAllowList } from '../../http/auth-types.ts';
import { normalizeRoutePattern, routeMatches } from '../../http/key-bounds.ts';

/** A route the key path serves: what a route allow list is checked against. */
export interface KeyRoute {
  method: string;
  url: string;
}

const routeName = (r: KeyRoute) => `${r.method} ${r.url}`;

/**
 * A mandate's model allow list: as asked (deduplicated, in order), each within every list of the parent's
 * chain; not asked: the models every list of the parent's chain allows (null when none has a list).
 */
export function mandateModels(asked: string[] | undefined, parent: KeyAllowList[] | undefined): string[] | null {
  const lists = (parent ?? []).map((l) => l.models).filter((m): m is string[] => m !== null);
  if (asked === undefined) {
    if (lists.length === 0) return null;
    return lists[0]!.filter((m) => lists.every((l) => l.includes(m)));
  }
  const models = [...new Set(asked)];
  for (const l of lists) {
    const outside = models.filter((m) => !l.includes(m));
    if (outside.length) throw invalid(`allowed_models: the parent key may not use ${outside.join(', ')}; it allows only ${l.join(', ')}`, 'allowed_models');
  }
  return models;
}

/**
 * A mandate's route allow list: each pattern well formed and matching at least one API-key route, and every
 * route it admits admitted by each list of the parent's chain. Not asked: the parent's list (or, with several
 * lists along its chain, the routes all of them admit, written out).
 */
export function mandateRoutes(asked: string[] | undefined, parent: KeyAllowList[] | undefined, keyRoutes: readonly KeyRoute[]): string[] | null {
  const lists = (parent ?? []).map((l) => l.routes).filter((r): r is string[] => r !== null);
  const admittedByParent = (r: KeyRoute) => lists.every((l) => l.some((p) => routeMatches(p, r.method, r.url)));
  if (asked === undefined) {
    if (lists.length === 0) return null;
    if (lists.length === 1) return lists[0]!;
    return keyRoutes.filter(admittedByParent).map(routeName);
  }
  const out: string[] = [];
  asked.forEach((raw, i) => {
    const param = `allowed_routes[${i}]`;
    const p = normalizeRoutePattern(raw);
    if (!p) throw invalid(`${param}: "${raw}" is not a route pattern: give "METHOD /v1/path", "/v1/path" or "/v1/prefix/*" (path parameters as :name)`, param);
    const admitted = keyRoutes.filter((r) => routeMatches(p, r.method, r.url));
    if (admitted.length === 0) throw invalid(`${param}: "${raw}" matches no route that API keys call`, param);
    const refused = admitted.find((r) => !admittedByParent(r));
    if (refused) throw invalid(`${param}: "${raw}" admits ${routeName(refused)}, which the parent key may not call`, param);
    if (!out.includes(p)) out.push(p);
  });
  return out;
}
