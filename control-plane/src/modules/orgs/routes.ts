import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { ORG_ROLES } from './roles.ts';
import type { OrgsService } from './service.ts';
import { INVITE_LIST_CAP, type OrgInvites } from './invites.ts';

const Role = z.enum(ORG_ROLES).describe('owner > admin > member.');
const Name = z.string().trim().min(1).max(100);

const OrgView = z.object({
  id: z.string(),
  object: z.literal('organization'),
  name: z.string(),
  billing_account_id: z.string().describe("The creator's account: keys, credit and receipts of the org live on it."),
  role: Role.describe("The caller's role."),
  member_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
const MemberView = z.object({ account_id: z.string(), role: Role, invited_by: z.string().nullable(), joined_at: z.string() });
const InviteView = z.object({
  id: z.string(),
  object: z.literal('org_invite'),
  org_id: z.string(),
  role: Role,
  account_id: z.string().nullable().describe('The only account that may accept; null: whoever holds the token.'),
  status: z.enum(['pending', 'accepted', 'revoked', 'expired']),
  created_by: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  accepted_at: z.string().nullable(),
  accepted_by: z.string().nullable(),
  revoked_at: z.string().nullable(),
});
const NewInvite = InviteView.extend({ token: z.string().describe('The orginv_ token; shown this once, stored only as sha256. Accept with POST /v1/orgs/invites/:token/accept.') });
const SwitchedSession = z.object({
  token: z.string().describe('A sess_ token acting as the billing account under your role; not set as a cookie.'),
  session_id: z.string(),
  org_id: z.string(),
  account_id: z.string().describe('The billing account the session acts as.'),
  acting_account_id: z.string(),
  role: Role,
  expires_at: z.string(),
});
const OrgParams = z.object({ id: z.string() });
const MemberParams = z.object({ id: z.string(), account_id: z.string() });
const InviteParams = z.object({ id: z.string(), invite_id: z.string() });

/** Organizations (spec: orgs): roster, roles, invites, and sessions acting for the billing account. */
export function orgRoutes(app: FastifyInstance, orgs: OrgsService, invites: OrgInvites): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['orgs'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/orgs',
    { config, schema: { tags, summary: "Create an org; the creator's account becomes its billing account and first owner", body: z.object({ name: Name }).strict(), response: { 201: OrgView } } },
    async (req, reply) => reply.code(201).send(await orgs.create(me(req), req.body.name)),
  );

  r.get('/v1/orgs', { config, schema: { tags, summary: 'Orgs the caller belongs to, with role (bare array)', response: { 200: z.array(OrgView) } } }, async (req) => orgs.list(me(req)));

  r.get(
    '/v1/orgs/:id',
    { config, schema: { tags, summary: "Detail, the caller's role, member count; 404 for an org the caller is not in", params: OrgParams, response: { 200: OrgView } } },
    async (req) => orgs.get(me(req), req.params.id),
  );

  r.patch(
    '/v1/orgs/:id',
    { config, schema: { tags, summary: 'Rename; admin or higher', params: OrgParams, body: z.object({ name: Name }).strict(), response: { 200: OrgView } } },
    async (req) => orgs.rename(me(req), req.params.id, req.body.name),
  );

  r.delete(
    '/v1/orgs/:id',
    {
      config,
      schema: {
        tags,
        summary: "Delete; owner only; every org session ends; the billing account's keys, credit and receipts are untouched",
        params: OrgParams,
        response: { 200: z.object({ id: z.string(), deleted: z.literal(true), sessions_revoked: z.number().int() }) },
      },
    },
    async (req) => orgs.delete(me(req), req.params.id),
  );

  r.post(
    '/v1/orgs/:id/switch',
    { config, schema: { tags, summary: "Mint a session acting as the org's billing account under your role", params: OrgParams, response: { 201: SwitchedSession } } },
    async (req, reply) => reply.code(201).send(await orgs.switchTo(me(req), req.params.id, req.headers['user-agent'])),
  );

  r.get(
    '/v1/orgs/:id/members',
    { config, schema: { tags, summary: 'Roster; any member (bare array)', params: OrgParams, response: { 200: z.array(MemberView) } } },
    async (req) => orgs.members(me(req), req.params.id),
  );

  r.patch(
    '/v1/orgs/:id/members/:account_id',
    {
      config,
      schema: {
        tags,
        summary: 'Change a role; admin or higher; never above your own; the last owner stays owner',
        params: MemberParams,
        body: z.object({ role: Role }).strict(),
        response: { 200: MemberView },
      },
    },
    async (req) => orgs.changeRole(me(req), req.params.id, req.params.account_id, req.body.role),
  );

  r.delete(
    '/v1/orgs/:id/members/:account_id',
    {
      config,
      schema: {
        tags,
        summary: 'Remove a member (admin or higher) or leave (your own account id); their org sessions die at once',
        params: MemberParams,
        response: {
          200: z.object({ org_id: z.string(), account_id: z.string(), removed: z.literal(true), left: z.boolean(), sessions_revoked: z.number().int() }),
        },
      },
    },
    async (req) => orgs.removeMember(me(req), req.params.id, req.params.account_id),
  );

  r.post(
    '/v1/orgs/:id/invites',
    {
      config,
      schema: {
        tags,
        summary: 'Invite link; the token is shown once; expires after 14 days; admin or higher; role never above your own',
        params: OrgParams,
        body: z
          .object({
            role: Role.default('member'),
            account_id: z.string().min(1).max(64).optional().describe('Bind the invite to this existing account; omitted: whoever holds the token.'),
          })
          .strict()
          .default({ role: 'member' }),
        response: { 201: NewInvite },
      },
    },
    async (req, reply) => reply.code(201).send(await invites.create(me(req), req.params.id, req.body)),
  );

  r.get(
    '/v1/orgs/:id/invites',
    { config, schema: { tags, summary: `Invites with status, newest first, at most ${INVITE_LIST_CAP}; admin or higher (bare array)`, params: OrgParams, response: { 200: z.array(InviteView) } } },
    async (req) => invites.list(me(req), req.params.id),
  );

  r.delete(
    '/v1/orgs/:id/invites/:invite_id',
    { config, schema: { tags, summary: 'Revoke an unaccepted invite; admin or higher', params: InviteParams, response: { 200: InviteView } } },
    async (req) => invites.revoke(me(req), req.params.id, req.params.invite_id),
  );

  r.post(
    '/v1/orgs/invites/:token/accept',
    { config, schema: { tags, summary: 'Join with an invite token; the signed-in account must already exist; single use', params: z.object({ token: z.string() }), response: { 200: OrgView } } },
    async (req) => invites.accept(me(req), req.params.token),
  );
}
