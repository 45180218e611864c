import { ServiceError } from '@svc/shared';

/** Org roles, lowest first: each role may do everything the roles below it may. */
export const ORG_ROLES = ['member', 'admin', 'owner'] as const;
export type OrgRole = (typeof ORG_ROLES)[number];

export function rank(role: OrgRole): number {
  return ORG_ROLES.indexOf(role);
}

export function isOrgRole(s: string | null | undefined): s is OrgRole {
  return s !== null && s !== undefined && (ORG_ROLES as readonly string[]).includes(s);
}

/** True when `role` is `least` or higher. */
export function atLeast(role: OrgRole, least: OrgRole): boolean {
  return rank(role) >= rank(least);
}

/**
 * The session routes a switched session (one acting for an org's billing account, from
 * `POST /v1/orgs/:id/switch`) may call, and the least role each needs. A route missing from this table
 * is refused to every switched session (403), so a route added later is closed until it is listed here.
 * The auth layer checks this table when it resolves the session; no route checks roles itself.
 *
 * Not listed on purpose: the account's own sign-in surface (`logout-all`, sessions, wallets), which
 * belongs to the billing account's holder, and the `/v1/orgs` routes, which a member calls with their
 * own session.
 */
export const ORG_ROUTE_ROLES: Readonly<Record<string, OrgRole>> = {
  // Who am I, and end this switched session.
  'GET /v1/auth/me': 'member',
  'POST /v1/auth/logout': 'member',
  // Read usage, receipts, balance, runs and statements.
  'GET /v1/billing/balance': 'member',
  'GET /v1/billing/ledger': 'member',
  'GET /v1/billing/deposits': 'member',
  'GET /v1/billing/alerts': 'member',
  'GET /v1/billing/subscription': 'member',
  'GET /v1/usage': 'member',
  'GET /v1/usage/events': 'member',
  'GET /v1/usage/stream': 'member',
  'GET /v1/usage/sandboxes': 'member',
  'GET /v1/usage/sandboxes/:id': 'member',
  'POST /v1/usage/statement': 'member',
  'GET /v1/receipts/:id': 'member',
  'GET /v1/runs': 'member',
  'GET /v1/runs/:id': 'member',
  'POST /v1/runs/:id/proof': 'member',
  'POST /v1/runs/:id/audit': 'member',
  'POST /v1/reports/sla': 'member',
  // Manage keys, webhooks, billing (deposits, alerts), receipt shares and nodes.
  'GET /v1/keys': 'admin',
  'POST /v1/keys': 'admin',
  'DELETE /v1/keys/:id': 'admin',
  'POST /v1/keys/:id/rotate': 'admin',
  'POST /v1/keys/:id/unfreeze': 'admin',
  // Policies ride on keys (admins, as for keys); guardrail rule sets and their findings.
  'GET /v1/policies': 'admin',
  'DELETE /v1/policies/:id': 'admin',
  'GET /v1/guardrails': 'member',
  'GET /v1/guardrails/findings': 'member',
  'POST /v1/guardrails': 'admin',
  'DELETE /v1/guardrails/:id': 'admin',
  'GET /v1/webhooks': 'admin',
  'POST /v1/webhooks': 'admin',
  'DELETE /v1/webhooks/:id': 'admin',
  'GET /v1/webhooks/:id/deliveries': 'admin',
  'POST /v1/webhooks/:id/test': 'admin',
  'POST /v1/billing/deposits': 'admin',
  'POST /v1/billing/deposits/refresh': 'admin',
  'PUT /v1/billing/alerts': 'admin',
  'POST /v1/receipts/:id/share': 'admin',
  'DELETE /v1/receipts/:id/share': 'admin',
  'GET /v1/nodes/mine': 'admin',
  'POST /v1/nodes/enroll': 'admin',
  'POST /v1/nodes/:id/:gate': 'admin',
  // Proof products: members read, commit and reveal sealed calls, prepare escrow claims; admins manage
  // source sets and KYA credentials and withdraw calls; the owner claims the account's handle (held for good).
  'GET /v1/calls': 'member',
  'POST /v1/calls': 'member',
  'POST /v1/calls/:id/reveal': 'member',
  'POST /v1/calls/:id/withdraw': 'admin',
  'GET /v1/sources/sets': 'member',
  'GET /v1/sources/sets/:id': 'member',
  'POST /v1/sources/sets': 'admin',
  'DELETE /v1/sources/sets/:id': 'admin',
  'GET /v1/escrow/claims': 'member',
  'GET /v1/escrow/claims/:request_id': 'member',
  'POST /v1/escrow/claims': 'member',
  'GET /v1/kya/credentials': 'member',
  'POST /v1/kya/credentials': 'admin',
  'DELETE /v1/kya/credentials/:id': 'admin',
  // Mandates and ghost sessions mint keys: admins, as for keys.
  'GET /v1/mandates': 'admin',
  'POST /v1/mandates': 'admin',
  'DELETE /v1/mandates/:id': 'admin',
  'POST /v1/mandates/:id/proof': 'admin',
  'GET /v1/ghost/sessions': 'admin',
  'POST /v1/ghost/sessions': 'admin',
  'GET /v1/ghost/sessions/:id': 'admin',
  'POST /v1/ghost/sessions/:id/extend': 'admin',
  'POST /v1/ghost/sessions/:id/destroy': 'admin',
  // MCP server registrations: members read them; admins register, edit, deregister and probe (the probe dials out with the sealed credential).
  'GET /v1/mcp-servers': 'member', // mcp
  'POST /v1/mcp-servers': 'admin', // mcp
  'PATCH /v1/mcp-servers/:id': 'admin', // mcp
  'DELETE /v1/mcp-servers/:id': 'admin', // mcp
  'POST /v1/mcp-servers/:id/test': 'admin', // mcp
  // Evals and drift monitors: members read suites, runs and monitors; admins create, run (metered), change and delete them.
  'GET /v1/evals': 'member', // quality
  'GET /v1/evals/:id/runs': 'member', // quality
  'GET /v1/evals/monitors': 'member', // quality
  'POST /v1/evals': 'admin', // quality
  'DELETE /v1/evals/:id': 'admin', // quality
  'POST /v1/evals/:id/run': 'admin', // quality
  'POST /v1/evals/monitors': 'admin', // quality
  'PATCH /v1/evals/monitors/:id': 'admin', // quality
  'DELETE /v1/evals/monitors/:id': 'admin', // quality
  // Hosted agents: members read agents and runs; admins deploy (a key is minted), run, gate, set triggers and hooks, delete.
  'GET /v1/agents': 'member', // agents
  'GET /v1/agents/:id/runs': 'member', // agents
  'GET /v1/agents/:id/runs/:run_id': 'member', // agents
  'POST /v1/agents': 'admin', // agents
  'POST /v1/agents/:id/trigger': 'admin', // agents
  'POST /v1/agents/:id/gate': 'admin', // agents
  'POST /v1/agents/:id/triggers': 'admin', // agents
  'POST /v1/agents/:id/hooks/rotate': 'admin', // agents
  'POST /v1/agents/:id/hooks/disable': 'admin', // agents
  'POST /v1/agents/:id/hooks/secret': 'admin', // agents
  'DELETE /v1/agents/:id': 'admin', // agents
  // Legacy plans: admins manage the account's plans (sealed content, claim links); attesting and claims go by
  // the wallets of the member acting, never the org's.
  'GET /v1/legacy/plans': 'admin', // legacy plans
  'POST /v1/legacy/plans': 'admin', // legacy plans
  'GET /v1/legacy/plans/:id': 'admin', // legacy plans
  'POST /v1/legacy/plans/:id/checkin': 'admin', // legacy plans
  'PUT /v1/legacy/plans/:id/content': 'admin', // legacy plans
  'POST /v1/legacy/plans/:id/cancel': 'admin', // legacy plans
  'POST /v1/legacy/plans/:id/attest': 'member', // legacy plans
  'GET /v1/legacy/attesting': 'member', // legacy plans
  'GET /v1/legacy/claims': 'member', // legacy plans
  'POST /v1/legacy/claims/:plan_id/open': 'member', // legacy plans
  'GET /v1/legacy/claims/:plan_id/objects/:object_id': 'member', // legacy plans
  // The private vault: members read the account's assets; admins register and run them; only the owner closes one (irreversible).
  // Settling a claim is not listed: it goes by the wallets of whoever settles, so it takes their own session.
  'GET /v1/vault/assets': 'member', // vault
  'GET /v1/vault/assets/:id': 'member', // vault
  'POST /v1/vault/assets': 'admin', // vault
  'POST /v1/vault/assets/:id/close': 'owner', // vault
  'GET /v1/vault/assets/:id/holders': 'member', // vault
  'GET /v1/vault/portfolio': 'member', // vault
  'GET /v1/vault/transfers': 'member', // vault
  'POST /v1/vault/transfers': 'admin', // vault
  'GET /v1/vault/claims': 'member', // vault
  'POST /v1/vault/claims/:id/cancel': 'admin', // vault
  'GET /v1/vault/distributions': 'member', // vault
  'POST /v1/vault/assets/:id/distribute': 'admin', // vault
  'GET /v1/vault/assets/:id/attesters': 'member', // vault
  'POST /v1/vault/assets/:id/attesters': 'admin', // vault
  'DELETE /v1/vault/assets/:id/attesters/:attester_id': 'admin', // vault
  'GET /v1/vault/assets/:id/attestations': 'member', // vault
  'POST /v1/vault/assets/:id/attestations': 'admin', // vault
  'POST /v1/vault/assets/:id/nav': 'admin', // vault
  'POST /v1/vault/proofs': 'admin', // vault
  'GET /v1/vault/assets/:id/documents': 'member', // vault
  'GET /v1/vault/assets/:id/documents/:doc_id': 'member', // vault
  'POST /v1/vault/assets/:id/documents': 'admin', // vault
  'DELETE /v1/vault/assets/:id/documents/:doc_id': 'admin', // vault
  'POST /v1/vault/assets/:id/view-grant': 'admin', // vault
  'GET /v1/vault/assets/:id/view-grants': 'admin', // vault
  'DELETE /v1/vault/view-grants/:id': 'admin', // vault
  // Engine builds: members read versions and what a slug serves; admins draft, publish, unpublish and delete them.
  'GET /v1/engine/builds': 'member', // engine builds
  'GET /v1/engine/builds/:id': 'member', // engine builds
  'GET /v1/engine/resolve/:slug': 'member', // engine builds
  'POST /v1/engine/builds': 'admin', // engine builds
  'DELETE /v1/engine/builds/:id': 'admin', // engine builds
  'POST /v1/engine/builds/:id/publish': 'admin', // engine builds
  'POST /v1/engine/builds/:id/unpublish': 'admin', // engine builds
  // Marketplace: members read the account's services and their calls; admins publish, update and retire.
  'GET /v1/services': 'member', // marketplace
  'GET /v1/services/manage/:slug/calls': 'member', // marketplace
  'POST /v1/services': 'admin', // marketplace
  'PATCH /v1/services/manage/:slug': 'admin', // marketplace
  'DELETE /v1/services/manage/:slug': 'admin', // marketplace
  // Relays: members list them (metadata only); admins create and revoke.
  'GET /v1/relays': 'member', // relays
  'POST /v1/relays': 'admin', // relays
  'POST /v1/relays/:id/revoke': 'admin', // relays
  // Replay capsules: members read capsules and their history (content-free); admins record, replay (metered) and delete.
  'GET /v1/replay/capsules': 'member', // replay capsules
  'GET /v1/replay/capsules/:id': 'member', // replay capsules
  'POST /v1/replay/capsules': 'admin', // replay capsules
  'POST /v1/replay/capsules/:id/replay': 'admin', // replay capsules
  'DELETE /v1/replay/capsules/:id': 'admin', // replay capsules
  // Autopilot: members read proposals; admins analyze (billed), adopt (publishes an engine version) and reject.
  'GET /v1/autopilot/proposals': 'member', // autopilot
  'GET /v1/autopilot/proposals/:id': 'member', // autopilot
  'POST /v1/autopilot/analyze': 'admin', // autopilot
  'POST /v1/autopilot/proposals/:id/adopt': 'admin', // autopilot
  'POST /v1/autopilot/proposals/:id/reject': 'admin', // autopilot
  // Dark pool: members read intents, matches and market status; admins submit, withdraw, ask, confirm and settle.
  'POST /v1/intents': 'admin', // dark pool
  'GET /v1/intents/:id': 'member', // dark pool
  'POST /v1/intents/:id/cancel': 'admin', // dark pool
  'POST /v1/matches': 'admin', // dark pool
  'GET /v1/matches/:id': 'member', // dark pool
  'POST /v1/matches/:id/confirm': 'admin', // dark pool
  'POST /v1/matches/:id/settle': 'admin', // dark pool
  'GET /v1/markets/:asset_id/status': 'member', // dark pool
  // Change the plan; claim the account's passport handle.
  'POST /v1/billing/subscription': 'owner',
  'POST /v1/billing/subscription/cancel': 'owner',
  'POST /v1/passport': 'owner',
};

/** The least role a switched session needs for a route, or undefined when no role may call it. */
export function roleFor(method: string, url: string): OrgRole | undefined {
  return ORG_ROUTE_ROLES[`${method.toUpperCase()} ${url}`];
}

/**
 * Refuses (403) a switched session whose role may not call this route; `url` is the route's template
 * (`/v1/keys/:id`), not the request's path.
 */
export function assertOrgRoute(role: string | null, method: string, url: string | undefined): void {
  const m = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
  const need = url ? roleFor(m, url) : undefined;
  if (!need) {
    throw new ServiceError('forbidden', `A session acting for an organization cannot call ${m} ${url ?? 'this route'}; use your own session`, {
      role,
    });
  }
  if (!isOrgRole(role) || !atLeast(role, need)) {
    throw new ServiceError('forbidden', `${m} ${url} needs the ${need} role or higher in this organization; this session acts as ${role ?? 'no role'}`, {
      role,
      required_role: need,
    });
  }
}
