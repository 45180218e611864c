import type { Kysely, Selectable } from 'kysely';
import { ServiceError, notFound } from '@svc/shared';
import type { DB, OrgMembersTable, OrgsTable } from '../../db/schema.ts';
import { atLeast, type OrgRole } from './roles.ts';

export type OrgRow = Selectable<OrgsTable>;
export type MemberRow = Selectable<OrgMembersTable>;

/** The same answer for an org that does not exist, was deleted, or that the caller is not in. */
export const orgNotFound = () => notFound('Organization');

/**
 * The org and the caller's role in it, or the uniform 404. With `lock`, the org row is locked for the rest
 * of the transaction, so role changes and removals in one org run one at a time (the last-owner check holds).
 */
export async function membership(db: Kysely<DB>, orgId: string, accountId: string, lock = false): Promise<{ org: OrgRow; role: OrgRole }> {
  let q = db.selectFrom('orgs').selectAll().where('id', '=', orgId);
  if (lock) q = q.forUpdate();
  const org = await q.executeTakeFirst();
  if (!org) throw orgNotFound();
  const m = await db.selectFrom('org_members').select('role').where('org_id', '=', orgId).where('account_id', '=', accountId).executeTakeFirst();
  if (!m) throw orgNotFound();
  return { org, role: m.role };
}

/** Refuses (403) a member below `least`. */
export function requireRole(role: OrgRole, least: OrgRole, doing: string): void {
  if (!atLeast(role, least)) {
    throw new ServiceError('forbidden', `Only ${least === 'owner' ? 'an owner' : 'an admin or owner'} may ${doing}; your role is ${role}`, { role, required_role: least });
  }
}

export async function memberCount(db: Kysely<DB>, orgId: string): Promise<number> {
  const r = await db.selectFrom('org_members').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function ownerCount(db: Kysely<DB>, orgId: string): Promise<number> {
  const r = await db
    .selectFrom('org_members')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('org_id', '=', orgId)
    .where('role', '=', 'owner')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export function orgView(org: OrgRow, role: OrgRole, members: number) {
  return {
    id: org.id,
    object: 'organization' as const,
    name: org.name,
    billing_account_id: org.billing_account_id,
    role,
    member_count: members,
    created_at: org.created_at.toISOString(),
    updated_at: org.updated_at.toISOString(),
  };
}

export function memberView(m: MemberRow) {
  return { account_id: m.account_id, role: m.role, invited_by: m.invited_by, joined_at: m.joined_at.toISOString() };
}
