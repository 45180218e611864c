import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SvcClient } from '@svc/shared/client';
import { expectApiError } from './support/expect-error.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { ORG_ROUTE_ROLES } from '../control-plane/src/modules/orgs/roles.ts';
import { ADMIN_TOKEN, startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';

interface Org { id: string; name: string; billing_account_id: string; role: string; member_count: number }
interface Member { account_id: string; role: string; invited_by: string | null }
interface Invite { id: string; status: string; role: string; account_id: string | null; token?: string }
interface Switched { token: string; account_id: string; acting_account_id: string; role: string; org_id: string }
type User = Awaited<ReturnType<TestGateway['signIn']>>;

const DAY = 24 * 3600_000;

let t: TestGateway;
let alice: User; // creator: billing account and first owner
let bob: User; // joins as admin
let carol: User; // joins as member
let org: Org;

const api = <T>(c: SvcClient, method: string, path: string, body?: unknown) => c.request<T>(method, path, body === undefined ? {} : { body });
const asSession = (token: string) => t.client.withCredential({ kind: 'session', token });
const switchTo = (u: User, orgId = org.id) => api<Switched>(u.client, 'POST', `/v1/orgs/${orgId}/switch`);
const roster = async () => (await api<Member[]>(alice.client, 'GET', `/v1/orgs/${org.id}/members`)).map((m) => [m.account_id, m.role]);
const count = async (table: 'org_invites' | 'org_members' | 'orgs') =>
  Number((await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

/** Opens the usage stream; `ended` resolves once the gateway ends it. */
async function openStream(c: SvcClient) {
  const res = await c.raw('GET', '/v1/usage/stream');
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('connected');
  return {
    async ended(): Promise<boolean> {
      for (;;) if ((await reader.read()).done) return true;
    },
  };
}

beforeAll(async () => {
  t = await startTestGateway();
  [alice, bob, carol] = [await t.signIn(), await t.signIn(), await t.signIn()];
  await t.gw.services.metering.credit(alice.accountId, 5_000_000, 'grant', `orgs-${alice.accountId}`);
});
afterAll(async () => t?.close());

describe('organizations', () => {
  it('the role table names only session routes the gateway serves', () => {
    const served = new Set(t.gw.app.routeTable.filter((r) => r.auth === 'session').map((r) => `${r.method} ${r.url}`));
    expect(Object.keys(ORG_ROUTE_ROLES).filter((r) => !served.has(r))).toEqual([]);
  });

  it('creates an org billed to its creator, lists it (bare array) and hides it from non-members with a uniform 404', async () => {
    org = await api<Org>(alice.client, 'POST', '/v1/orgs', { name: 'Acme' });
    expect(org).toMatchObject({ name: 'Acme', billing_account_id: alice.accountId, role: 'owner', member_count: 1 });
    expect(org.id).toMatch(/^org_/);
    const mine = await api<Org[]>(alice.client, 'GET', '/v1/orgs');
    expect(Array.isArray(mine)).toBe(true);
    expect(mine.map((o) => [o.id, o.role])).toEqual([[org.id, 'owner']]);
    expect(await api<Org[]>(bob.client, 'GET', '/v1/orgs')).toEqual([]);

    const hidden = await expectApiError(api(bob.client, 'GET', `/v1/orgs/${org.id}`), 404, 'not_found');
    const missing = await expectApiError(api(bob.client, 'GET', '/v1/orgs/org_doesnotexist'), 404, 'not_found');
    expect(hidden.message).toBe(missing.message);
    for (const [m, p] of [['GET', '/members'], ['POST', '/switch'], ['GET', '/invites'], ['DELETE', '']] as const) {
      await expectApiError(api(carol.client, m, `/v1/orgs/${org.id}${p}`), 404, 'not_found');
    }
    const bad = await expectApiError(api(alice.client, 'POST', '/v1/orgs', { name: '' }), 400, 'invalid_request');
    expect(bad.param).toBe('name');
    await expectApiError(api(alice.client, 'POST', '/v1/orgs', { name: 'x', extra: 1 }), 400, 'invalid_request');
  });

  it('invites: token once, bound to an existing account, single use; a link for anyone; refusals write nothing', async () => {
    const forBob = await api<Invite>(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { role: 'admin', account_id: bob.accountId });
    expect(forBob).toMatchObject({ status: 'pending', role: 'admin', account_id: bob.accountId });
    expect(forBob.token).toMatch(/^orginv_/);
    const stored = await t.gw.database.db.selectFrom('org_invites').select('token_hash').where('id', '=', forBob.id).executeTakeFirstOrThrow();
    expect(stored.token_hash).not.toContain(forBob.token!.slice(7));

    // Issued to Bob: Carol cannot take it.
    await expectApiError(api(carol.client, 'POST', `/v1/orgs/invites/${forBob.token}/accept`), 403, 'forbidden');
    t.clock.advance(1000); // distinct join times: the roster lists oldest first
    const joined = await api<Org>(bob.client, 'POST', `/v1/orgs/invites/${forBob.token}/accept`);
    expect(joined).toMatchObject({ id: org.id, role: 'admin', member_count: 2 });
    const reused = await expectApiError(api(bob.client, 'POST', `/v1/orgs/invites/${forBob.token}/accept`), 409, 'conflict');
    expect(reused.body?.error.status).toBe('accepted');

    // A link for whoever holds it, created by the admin.
    const link = await api<Invite>(bob.client, 'POST', `/v1/orgs/${org.id}/invites`, {});
    expect(link).toMatchObject({ role: 'member', account_id: null });
    t.clock.advance(1000);
    expect((await api<Org>(carol.client, 'POST', `/v1/orgs/invites/${link.token}/accept`)).role).toBe('member');
    expect(await roster()).toEqual([[alice.accountId, 'owner'], [bob.accountId, 'admin'], [carol.accountId, 'member']]);

    const invites = await count('org_invites');
    const ghost = await expectApiError(api(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { account_id: 'acct_nobody' }), 400, 'invalid_request');
    expect(ghost.param).toBe('account_id');
    const above = await expectApiError(api(bob.client, 'POST', `/v1/orgs/${org.id}/invites`, { role: 'owner' }), 403, 'forbidden');
    expect(above.param).toBe('role');
    await expectApiError(api(carol.client, 'POST', `/v1/orgs/${org.id}/invites`, {}), 403, 'forbidden');
    await expectApiError(api(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { account_id: carol.accountId }), 409, 'conflict');
    const badRole = await expectApiError(api(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { role: 'king' }), 400, 'invalid_request');
    expect(badRole.param).toBe('role');
    expect(await count('org_invites')).toBe(invites);
    await expectApiError(api(carol.client, 'POST', '/v1/orgs/invites/orginv_unknown/accept'), 404, 'not_found');
  });

  it('invites: revoked and expired tokens are refused, and the list shows every status (admin or higher)', async () => {
    const outsider = await t.signIn();
    const revoked = await api<Invite>(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, {});
    expect((await api<Invite>(bob.client, 'DELETE', `/v1/orgs/${org.id}/invites/${revoked.id}`)).status).toBe('revoked');
    expect((await api<Invite>(bob.client, 'DELETE', `/v1/orgs/${org.id}/invites/${revoked.id}`)).status).toBe('revoked');
    const r = await expectApiError(api(outsider.client, 'POST', `/v1/orgs/invites/${revoked.token}/accept`), 409, 'conflict');
    expect(r.body?.error.status).toBe('revoked');

    const expiring = await api<Invite>(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { role: 'admin' });
    t.clock.advance(14 * DAY - 1000);
    const still = await api<Invite[]>(bob.client, 'GET', `/v1/orgs/${org.id}/invites`);
    expect(still.find((i) => i.id === expiring.id)?.status).toBe('pending');
    t.clock.advance(1000);
    const e = await expectApiError(api(outsider.client, 'POST', `/v1/orgs/invites/${expiring.token}/accept`), 409, 'conflict');
    expect(e.body?.error.status).toBe('expired');
    expect(await api<Org[]>(outsider.client, 'GET', '/v1/orgs')).toEqual([]);

    const list = await api<Invite[]>(alice.client, 'GET', `/v1/orgs/${org.id}/invites`);
    expect(Array.isArray(list)).toBe(true);
    expect(list.every((i) => i.token === undefined)).toBe(true);
    expect(list.map((i) => i.status).sort()).toEqual(['accepted', 'accepted', 'expired', 'revoked']);
    expect(list.find((i) => i.id === expiring.id)?.status).toBe('expired');
    expect(list.find((i) => i.id === revoked.id)?.status).toBe('revoked');
    await expectApiError(api(carol.client, 'GET', `/v1/orgs/${org.id}/invites`), 403, 'forbidden');
    const accepted = list.find((i) => i.status === 'accepted')!;
    await expectApiError(api(alice.client, 'DELETE', `/v1/orgs/${org.id}/invites/${accepted.id}`), 409, 'conflict');
    await expectApiError(api(alice.client, 'DELETE', `/v1/orgs/${org.id}/invites/oinv_nothere`), 404, 'not_found');
  });

  it('role rules: any member reads the roster; admin renames and changes roles, never above its own; the last owner stays', async () => {
    const seen = await api<Member[]>(carol.client, 'GET', `/v1/orgs/${org.id}/members`);
    expect(seen.map((m) => m.account_id)).toEqual([alice.accountId, bob.accountId, carol.accountId]);
    expect((await api<Org>(carol.client, 'GET', `/v1/orgs/${org.id}`)).member_count).toBe(3);

    await expectApiError(api(carol.client, 'PATCH', `/v1/orgs/${org.id}`, { name: 'Mine' }), 403, 'forbidden');
    expect((await api<Org>(bob.client, 'PATCH', `/v1/orgs/${org.id}`, { name: 'Acme Labs' })).name).toBe('Acme Labs');
    await expectApiError(api(carol.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'admin' }), 403, 'forbidden');
    const up = await expectApiError(api(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'owner' }), 403, 'forbidden');
    expect(up.param).toBe('role');
    await expectApiError(api(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/${alice.accountId}`, { role: 'member' }), 403, 'forbidden');
    await expectApiError(api(bob.client, 'DELETE', `/v1/orgs/${org.id}/members/${alice.accountId}`), 403, 'forbidden');
    await expectApiError(api(carol.client, 'DELETE', `/v1/orgs/${org.id}/members/${bob.accountId}`), 403, 'forbidden');
    await expectApiError(api(bob.client, 'DELETE', `/v1/orgs/${org.id}`), 403, 'forbidden');
    expect((await api<Member>(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'admin' })).role).toBe('admin');
    expect((await api<Member>(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'member' })).role).toBe('member');
    await expectApiError(api(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/acct_nobody`, { role: 'member' }), 404, 'not_found');

    const demote = await expectApiError(api(alice.client, 'PATCH', `/v1/orgs/${org.id}/members/${alice.accountId}`, { role: 'admin' }), 409, 'conflict');
    expect(demote.body?.error.reason).toBe('last_owner');
    const leave = await expectApiError(api(alice.client, 'DELETE', `/v1/orgs/${org.id}/members/${alice.accountId}`), 409, 'conflict');
    expect(leave.body?.error.reason).toBe('last_owner');
    expect(await roster()).toEqual([[alice.accountId, 'owner'], [bob.accountId, 'admin'], [carol.accountId, 'member']]);

    // With a second owner, an owner may step down; then the other is the last one.
    await api(alice.client, 'PATCH', `/v1/orgs/${org.id}/members/${bob.accountId}`, { role: 'owner' });
    expect((await api<Member>(bob.client, 'PATCH', `/v1/orgs/${org.id}/members/${bob.accountId}`, { role: 'admin' })).role).toBe('admin');
    expect(await roster()).toEqual([[alice.accountId, 'owner'], [bob.accountId, 'admin'], [carol.accountId, 'member']]);
  });

  it('a switched session acts as the billing account under the role table, and follows role changes at once', async () => {
    const asBob = await switchTo(bob);
    expect(asBob).toMatchObject({ account_id: alice.accountId, acting_account_id: bob.accountId, role: 'admin', org_id: org.id });
    const b = asSession(asBob.token);
    expect((await api<{ account_id: string }>(b, 'GET', '/v1/auth/me')).account_id).toBe(alice.accountId);
    const balance = await api<{ balance_micro_usd: number }>(b, 'GET', '/v1/billing/balance');
    expect(balance.balance_micro_usd).toBe(5_000_000);
    await api(b, 'GET', '/v1/usage');
    const key = await api<{ id: string; key: string }>(b, 'POST', '/v1/keys', { name: 'made by admin' });
    expect((await alice.client.listKeys()).map((k) => k.id)).toContain(key.id);
    const plan = await expectApiError(api(b, 'POST', '/v1/billing/subscription', { plan: 'pro' }), 403, 'forbidden');
    expect(plan.body?.error.required_role).toBe('owner');
    for (const [m, p] of [['GET', '/v1/orgs'], ['POST', '/v1/auth/logout-all'], ['GET', '/v1/auth/sessions'], ['GET', `/v1/orgs/${org.id}/members`]] as const) {
      await expectApiError(api(b, m, p), 403, 'forbidden');
    }

    const asCarol = asSession((await switchTo(carol)).token);
    expect((await api<{ balance_micro_usd: number }>(asCarol, 'GET', '/v1/billing/balance')).balance_micro_usd).toBe(5_000_000);
    await api(asCarol, 'GET', '/v1/usage/events');
    const denied = await expectApiError(api(asCarol, 'POST', '/v1/keys', {}), 403, 'forbidden');
    expect(denied.body?.error).toMatchObject({ role: 'member', required_role: 'admin' });
    await expectApiError(api(asCarol, 'GET', '/v1/keys'), 403, 'forbidden');
    await api(alice.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'admin' });
    expect(Array.isArray(await api(asCarol, 'GET', '/v1/keys'))).toBe(true);
    await api(alice.client, 'PATCH', `/v1/orgs/${org.id}/members/${carol.accountId}`, { role: 'member' });
    await expectApiError(api(asCarol, 'GET', '/v1/keys'), 403, 'forbidden');

    // Proof products: a member commits a sealed call for the billing account, but only an admin withdraws it;
    // the handle is the owner's to claim.
    const call = await api<{ id: string }>(asCarol, 'POST', '/v1/calls', { text: 'sealed for the org' });
    expect((await api<{ calls: Array<{ id: string }> }>(alice.client, 'GET', '/v1/calls')).calls.map((c) => c.id)).toContain(call.id);
    expect((await expectApiError(api(asCarol, 'POST', `/v1/calls/${call.id}/withdraw`), 403, 'forbidden')).body?.error.required_role).toBe('admin');
    await api(b, 'POST', `/v1/calls/${call.id}/withdraw`);
    expect((await expectApiError(api(b, 'POST', '/v1/passport', { handle: 'org-handle' }), 403, 'forbidden')).body?.error.required_role).toBe('owner');

    // A suspended member's switched session is refused like the member's own sessions.
    const suspend = (suspended: boolean) =>
      t.client.request('POST', '/v1/admin/accounts/suspend', { body: { account_id: bob.accountId, suspended }, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
    await suspend(true);
    await expectApiError(api(b, 'GET', '/v1/billing/balance'), 403, 'account_suspended');
    await expectApiError(switchTo(bob), 403, 'account_suspended');
    await suspend(false);
    await api(b, 'GET', '/v1/billing/balance');

    // An owner's switched session may change the plan (the role table admits it; the plan route answers itself).
    const asAlice = asSession((await switchTo(alice)).token);
    const res = await asAlice.raw('POST', '/v1/billing/subscription', { body: { plan: 'no-such-plan' } });
    expect(res.status).not.toBe(403);
  });

  it('removing a member or leaving kills their org sessions at once; others keep theirs', async () => {
    const asCarol = asSession((await switchTo(carol)).token);
    const asBob = asSession((await switchTo(bob)).token);
    const stream = await openStream(asCarol);
    const removed = await api<{ sessions_revoked: number; left: boolean }>(bob.client, 'DELETE', `/v1/orgs/${org.id}/members/${carol.accountId}`);
    expect(removed).toMatchObject({ left: false });
    expect(removed.sessions_revoked).toBeGreaterThanOrEqual(2);
    await expectApiError(api(asCarol, 'GET', '/v1/billing/balance'), 401, 'invalid_credential');
    expect(await stream.ended()).toBe(true);
    await expectApiError(api(carol.client, 'GET', `/v1/orgs/${org.id}`), 404, 'not_found');
    expect((await carol.client.me()).account_id).toBe(carol.accountId); // her own session lives on
    await api(asBob, 'GET', '/v1/billing/balance');

    // Back in through an invite, then she leaves herself.
    const inv = await api<Invite>(alice.client, 'POST', `/v1/orgs/${org.id}/invites`, { account_id: carol.accountId });
    await api(carol.client, 'POST', `/v1/orgs/invites/${inv.token}/accept`);
    const again = asSession((await switchTo(carol)).token);
    expect((await api<{ left: boolean }>(carol.client, 'DELETE', `/v1/orgs/${org.id}/members/${carol.accountId}`)).left).toBe(true);
    await expectApiError(api(again, 'GET', '/v1/usage'), 401, 'invalid_credential');
  });

  it("deleting is owner only; every org session ends; the billing account's keys and credit stay", async () => {
    const asBob = asSession((await switchTo(bob)).token);
    const stream = await openStream(asBob);
    const keysBefore = (await alice.client.listKeys()).map((k) => k.id);
    await expectApiError(api(bob.client, 'DELETE', `/v1/orgs/${org.id}`), 403, 'forbidden');
    const gone = await api<{ deleted: boolean; sessions_revoked: number }>(alice.client, 'DELETE', `/v1/orgs/${org.id}`);
    expect(gone.deleted).toBe(true);
    await expectApiError(api(asBob, 'GET', '/v1/billing/balance'), 401, 'invalid_credential');
    expect(await stream.ended()).toBe(true);
    await expectApiError(api(alice.client, 'GET', `/v1/orgs/${org.id}`), 404, 'not_found');
    await expectApiError(api(alice.client, 'DELETE', `/v1/orgs/${org.id}`), 404, 'not_found');
    expect(await api<Org[]>(bob.client, 'GET', '/v1/orgs')).toEqual([]);
    expect((await alice.client.listKeys()).map((k) => k.id)).toEqual(keysBefore);
    expect((await api<{ balance_micro_usd: number }>(alice.client, 'GET', '/v1/billing/balance')).balance_micro_usd).toBe(5_000_000);
  });
});

describe.skipIf(TEST_DB_KIND === 'pglite')('organizations across processes', () => {
  it('a member removed on one process has their switched session refused by the other at once', async () => {
    const { a, b, close } = await startGatewayPair();
    try {
      const [owner, member] = [await a.signIn(), await a.signIn()];
      const o = await owner.client.request<Org>('POST', '/v1/orgs', { body: { name: 'Two' } });
      const inv = await owner.client.request<Invite>('POST', `/v1/orgs/${o.id}/invites`, { body: { role: 'admin' } });
      await member.client.request('POST', `/v1/orgs/invites/${inv.token}/accept`);
      const s = await member.client.request<Switched>('POST', `/v1/orgs/${o.id}/switch`);
      const onB = b.client.withCredential({ kind: 'session', token: s.token });
      expect(Array.isArray(await onB.request('GET', '/v1/keys'))).toBe(true);
      const stream = await openStream(onB);
      await owner.client.request('PATCH', `/v1/orgs/${o.id}/members/${member.accountId}`, { body: { role: 'member' } });
      await expectApiError(onB.request('GET', '/v1/keys'), 403, 'forbidden');
      await owner.client.request('DELETE', `/v1/orgs/${o.id}/members/${member.accountId}`);
      await expectApiError(onB.request('GET', '/v1/billing/balance'), 401, 'invalid_credential');
      expect(await stream.ended()).toBe(true); // the stream open on the other process ends too
    } finally {
      await close();
    }
  });
});
