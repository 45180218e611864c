import type { Kysely } from 'kysely';
import { ServiceError, newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { SessionPrincipal } from '../../http/auth-types.ts';
import type { IdentityService } from '../identity/service.ts';
import { rank, type OrgRole } from './roles.ts';
import type { OrgSessionEnds } from './session-ends.ts';
import { memberCount, memberView, membership, orgView, ownerCount, requireRole } from './store.ts';

/**
 * Organizations and their members. Owns the orgs and org_members tables; sessions stay identity's (a
 * switched session is minted and revoked through IdentityService, inside this module's transactions).
 */
export class OrgsService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly identity: IdentityService,
    private readonly ends: OrgSessionEnds,
  ) {}

  /** The creator's account becomes the billing account and the first owner. */
  async create(accountId: string, name: string) {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      const org = { id: newId('org_'), name, billing_account_id: accountId, created_by: accountId, created_at: now, updated_at: now };
      await trx.insertInto('orgs').values(org).execute();
      await trx.insertInto('org_members').values({ org_id: org.id, account_id: accountId, role: 'owner', invited_by: null, joined_at: now }).execute();
      return orgView(org, 'owner', 1);
    });
  }

  /** Orgs the account belongs to, with its role, oldest membership first. */
  async list(accountId: string) {
    const rows = await this.db
      .selectFrom('org_members as m')
      .innerJoin('orgs as o', 'o.id', 'm.org_id')
      .selectAll('o')
      .select(['m.role', (eb) => eb.selectFrom('org_members as c').select((c) => c.fn.countAll<number>().as('n')).whereRef('c.org_id', '=', 'o.id').as('members')])
      .where('m.account_id', '=', accountId)
      .orderBy('m.joined_at')
      .orderBy('o.id')
      .execute();
    return rows.map(({ role, members, ...org }) => orgView(org, role, Number(members)));
  }

  async get(accountId: string, orgId: string) {
    const { org, role } = await membership(this.db, orgId, accountId);
    return orgView(org, role, await memberCount(this.db, orgId));
  }

  async rename(accountId: string, orgId: string, name: string) {
    return this.db.transaction().execute(async (trx) => {
      const { org, role } = await membership(trx, orgId, accountId, true);
      requireRole(role, 'admin', 'rename the organization');
      const now = this.clock.now();
      await trx.updateTable('orgs').set({ name, updated_at: now }).where('id', '=', orgId).execute();
      return orgView({ ...org, name, updated_at: now }, role, await memberCount(trx, orgId));
    });
  }

  /** Owner only. Every org session ends; the billing account's keys, credit and receipts are untouched. */
  async delete(accountId: string, orgId: string) {
    return this.db.transaction().execute(async (trx) => {
      const { role } = await membership(trx, orgId, accountId, true);
      requireRole(role, 'owner', 'delete the organization');
      const revoked = await this.identity.revokeOrgSessions(trx, orgId);
      await this.ends.announce(trx, orgId);
      await trx.deleteFrom('orgs').where('id', '=', orgId).execute(); // members and invites go with it
      return { id: orgId, deleted: true as const, sessions_revoked: revoked };
    });
  }

  /** A session that acts as the org's billing account under the caller's role. */
  async switchTo(accountId: string, orgId: string, userAgent: string | undefined) {
    return this.db.transaction().execute(async (trx) => {
      const { org, role } = await membership(trx, orgId, accountId);
      const s = await this.identity.mintOrgSession(trx, org.billing_account_id, { id: orgId, memberAccountId: accountId }, userAgent);
      return { token: s.token, session_id: s.session_id, org_id: orgId, account_id: org.billing_account_id, acting_account_id: accountId, role, expires_at: s.expires_at };
    });
  }

  async members(accountId: string, orgId: string) {
    await membership(this.db, orgId, accountId);
    const rows = await this.db.selectFrom('org_members').selectAll().where('org_id', '=', orgId).orderBy('joined_at').orderBy('account_id').execute();
    return rows.map(memberView);
  }

  /** Admin or higher; never to a role above one's own, never on a member above one's own; the last owner stays owner. */
  async changeRole(accountId: string, orgId: string, targetId: string, newRole: OrgRole) {
    return this.db.transaction().execute(async (trx) => {
      const { role } = await membership(trx, orgId, accountId, true);
      requireRole(role, 'admin', 'change roles');
      const target = await trx.selectFrom('org_members').selectAll().where('org_id', '=', orgId).where('account_id', '=', targetId).executeTakeFirst();
      if (!target) throw new ServiceError('not_found', 'Member not found', { param: 'account_id' });
      if (rank(newRole) > rank(role)) {
        throw new ServiceError('forbidden', `role: you cannot grant ${newRole}, a role above your own (${role})`, { param: 'role', role, requested_role: newRole });
      }
      if (rank(target.role) > rank(role)) {
        throw new ServiceError('forbidden', `You cannot change the role of a member whose role (${target.role}) is above your own (${role})`, { role, member_role: target.role });
      }
      if (target.role === 'owner' && newRole !== 'owner' && (await ownerCount(trx, orgId)) === 1) {
        throw new ServiceError('conflict', 'The last owner cannot be demoted; make another member owner first', { reason: 'last_owner' });
      }
      await trx.updateTable('org_members').set({ role: newRole }).where('org_id', '=', orgId).where('account_id', '=', targetId).execute();
      return memberView({ ...target, role: newRole });
    });
  }

  /**
   * Removes a member (admin or higher, never one above one's own role) or leaves (any member). Their org
   * sessions are revoked in the same transaction; session lookups read the database on every request, so
   * every control-plane process refuses them from the next request on, and requests still open under them
   * (a usage stream) are ended in every process by the notice sent on commit.
   */
  async removeMember(accountId: string, orgId: string, targetId: string) {
    return this.db.transaction().execute(async (trx) => {
      const { role } = await membership(trx, orgId, accountId, true);
      const leaving = targetId === accountId;
      if (!leaving) requireRole(role, 'admin', 'remove members');
      const target = await trx.selectFrom('org_members').select('role').where('org_id', '=', orgId).where('account_id', '=', targetId).executeTakeFirst();
      if (!target) throw new ServiceError('not_found', 'Member not found', { param: 'account_id' });
      if (!leaving && rank(target.role) > rank(role)) {
        throw new ServiceError('forbidden', `You cannot remove a member whose role (${target.role}) is above your own (${role})`, { role, member_role: target.role });
      }
      if (target.role === 'owner' && (await ownerCount(trx, orgId)) === 1) {
        throw new ServiceError('conflict', 'The last owner cannot leave or be removed; make another member owner first, or delete the organization', {
          reason: 'last_owner',
        });
      }
      await trx.deleteFrom('org_members').where('org_id', '=', orgId).where('account_id', '=', targetId).execute();
      const revoked = await this.identity.revokeOrgSessions(trx, orgId, targetId);
      await this.ends.announce(trx, orgId, targetId);
      return { org_id: orgId, account_id: targetId, removed: true as const, left: leaving, sessions_revoked: revoked };
    });
  }

  /**
   * Completes a switched session for the auth layer: the acting member's current role, read on every
   * request, so a role change applies at once. A member no longer in the org, or a deleted org, ends it.
   */
  async resolveSession(p: SessionPrincipal): Promise<SessionPrincipal> {
    if (!p.org) return p;
    const m = await this.db
      .selectFrom('org_members as m')
      .innerJoin('orgs as o', 'o.id', 'm.org_id')
      .select('m.role')
      .where('m.org_id', '=', p.org.id)
      .where('m.account_id', '=', p.org.memberAccountId)
      .where('o.billing_account_id', '=', p.accountId)
      .executeTakeFirst();
    if (!m) throw new ServiceError('invalid_credential', 'This organization session has ended (the member left or was removed, or the organization was deleted)');
    return { ...p, org: { ...p.org, role: m.role } };
  }
}
