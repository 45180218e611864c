import type { Kysely, Selectable } from 'kysely';
import { ServiceError, digestEquals, invalid, newId, newSecret, notFound, sha256Hex, type Clock } from '@svc/shared';
import type { DB, OrgInvitesTable } from '../../db/schema.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { IdentityService } from '../identity/service.ts';
import { rank, type OrgRole } from './roles.ts';
import { memberCount, membership, orgView, requireRole } from './store.ts';

/** Org invite expiry (spec document 3, Limits). */
export const INVITE_TTL_MS = 14 * 24 * 3600_000;
/** `GET /v1/orgs/:id/invites` returns at most this many, newest first. */
export const INVITE_LIST_CAP = 200;
export const INVITE_TOKEN_PREFIX = 'orginv_';

export type InviteStatus = 'pending' | 'accepted' | 'revoked' | 'expired';
type InviteRow = Selectable<OrgInvitesTable>;

function statusOf(i: InviteRow, now: Date): InviteStatus {
  if (i.accepted_at) return 'accepted';
  if (i.revoked_at) return 'revoked';
  if (i.expires_at.getTime() <= now.getTime()) return 'expired';
  return 'pending';
}

function inviteView(i: InviteRow, now: Date) {
  return {
    id: i.id,
    object: 'org_invite' as const,
    org_id: i.org_id,
    role: i.role,
    account_id: i.account_id,
    status: statusOf(i, now),
    created_by: i.created_by,
    created_at: i.created_at.toISOString(),
    expires_at: i.expires_at.toISOString(),
    accepted_at: i.accepted_at?.toISOString() ?? null,
    accepted_by: i.accepted_by,
    revoked_at: i.revoked_at?.toISOString() ?? null,
  };
}

/** Org invites: a token shown once and kept as sha256, valid 14 days, accepted once. Owns org_invites. */
export class OrgInvites {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly identity: IdentityService,
  ) {}

  /** Admin or higher; the invited role is never above the inviter's. Naming an account binds the invite to it. */
  async create(accountId: string, orgId: string, input: { role: OrgRole; account_id?: string | undefined }) {
    return this.db.transaction().execute(async (trx) => {
      const { role } = await membership(trx, orgId, accountId, true);
      requireRole(role, 'admin', 'invite members');
      if (rank(input.role) > rank(role)) {
        throw new ServiceError('forbidden', `role: you cannot invite as ${input.role}, a role above your own (${role})`, { param: 'role', role, requested_role: input.role });
      }
      if (input.account_id !== undefined) {
        if (!(await this.identity.accountExists(trx, input.account_id))) throw invalid('account_id: no account has this id; the invited account must already exist', 'account_id');
        const already = await trx.selectFrom('org_members').select('role').where('org_id', '=', orgId).where('account_id', '=', input.account_id).executeTakeFirst();
        if (already) throw new ServiceError('conflict', `account_id: this account is already a member (${already.role})`, { param: 'account_id' });
      }
      const now = this.clock.now();
      const token = newSecret(INVITE_TOKEN_PREFIX);
      const row: InviteRow = {
        id: newId('oinv_'),
        org_id: orgId,
        token_hash: sha256Hex(token),
        role: input.role,
        account_id: input.account_id ?? null,
        created_by: accountId,
        created_at: now,
        expires_at: new Date(now.getTime() + INVITE_TTL_MS),
        accepted_at: null,
        accepted_by: null,
        revoked_at: null,
      };
      await trx.insertInto('org_invites').values(row).execute();
      return { ...inviteView(row, now), token };
    });
  }

  /** Admin or higher: the newest invites with their status. */
  async list(accountId: string, orgId: string) {
    const { role } = await membership(this.db, orgId, accountId);
    requireRole(role, 'admin', 'list invites');
    const rows = await this.db.selectFrom('org_invites').selectAll().where('org_id', '=', orgId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(INVITE_LIST_CAP).execute();
    const now = this.clock.now();
    return rows.map((r) => inviteView(r, now));
  }

  /** Admin or higher revokes an unaccepted invite (again: the same answer). An accepted one is refused. */
  async revoke(accountId: string, orgId: string, inviteId: string) {
    return this.db.transaction().execute(async (trx) => {
      const { role } = await membership(trx, orgId, accountId);
      requireRole(role, 'admin', 'revoke invites');
      const inv = await trx.selectFrom('org_invites').selectAll().where('id', '=', inviteId).where('org_id', '=', orgId).forUpdate().executeTakeFirst();
      if (!inv) throw notFound('Invite');
      if (rank(inv.role) > rank(role)) {
        throw new ServiceError('forbidden', `You cannot revoke an invite for a role (${inv.role}) above your own (${role})`, { role, invite_role: inv.role });
      }
      if (inv.accepted_at) throw new ServiceError('conflict', 'This invite was already accepted; remove the member instead', { status: 'accepted' });
      const now = this.clock.now();
      const revoked = inv.revoked_at ? inv : { ...inv, revoked_at: now };
      if (!inv.revoked_at) await trx.updateTable('org_invites').set({ revoked_at: now }).where('id', '=', inv.id).execute();
      return inviteView(revoked, now);
    });
  }

  /** Joins the invite's org with its role: once, before expiry, unless revoked; by an existing account. */
  async accept(accountId: string, token: string) {
    const hash = sha256Hex(token);
    return this.db.transaction().execute(async (trx) => {
      const found = await trx.selectFrom('org_invites').select('org_id').where('token_hash', '=', hash).executeTakeFirst();
      // The org first, then the invite: the order of role changes, removals and deletion, so none waits on the other in a cycle.
      const orgLocked = found && (await trx.selectFrom('orgs').select('id').where('id', '=', found.org_id).forUpdate().executeTakeFirst());
      const inv = orgLocked && (await trx.selectFrom('org_invites').selectAll().where('token_hash', '=', hash).forUpdate().executeTakeFirst());
      if (!inv || !digestEquals(inv.token_hash, hash)) throw notFound('Invite');
      const now = this.clock.now();
      const status = statusOf(inv, now);
      if (status === 'accepted') throw new ServiceError('conflict', 'This invite was already used; ask for a new one', { status, param: 'token' });
      if (status === 'revoked') throw new ServiceError('conflict', 'This invite was revoked; ask for a new one', { status, param: 'token' });
      if (status === 'expired') throw new ServiceError('conflict', 'This invite expired (invites last 14 days); ask for a new one', { status, param: 'token' });
      if (inv.account_id && inv.account_id !== accountId) throw new ServiceError('forbidden', 'This invite was issued to another account');
      if (!(await this.identity.accountExists(trx, accountId))) throw notFound('Account');
      const already = await trx.selectFrom('org_members').select('role').where('org_id', '=', inv.org_id).where('account_id', '=', accountId).executeTakeFirst();
      if (already) throw new ServiceError('conflict', `You are already a member of this organization (${already.role})`, { status });
      await trx
        .insertInto('org_members')
        .values({ org_id: inv.org_id, account_id: accountId, role: inv.role, invited_by: inv.created_by, joined_at: now })
        .execute()
        .catch((e: unknown) => {
          // Another invite of the same org accepted by this account at the same moment.
          throw isUniqueViolation(e) ? new ServiceError('conflict', 'You are already a member of this organization', { status }) : e;
        });
      await trx.updateTable('org_invites').set({ accepted_at: now, accepted_by: accountId }).where('id', '=', inv.id).execute();
      const { org, role } = await membership(trx, inv.org_id, accountId);
      return orgView(org, role, await memberCount(trx, inv.org_id));
    });
  }
}
