import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SvcClient } from '@svc/shared/client';
import { startTestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { buf, rootFromPath } from './support/merkle.ts';

/**
 * Legacy plans end to end, on the leader's loop with an injected clock: a plan goes through warning, a check-in
 * that clears the warning and every confirmation, warning again, the attester quorum and release (exactly
 * once), then is opened once by the beneficiary's wallet session; another is cancelled and its claim link
 * answers 404 like an unknown one. Hashes are checked with node's sha256, the event chain and its anchor
 * inclusion proofs with the test's own code, never the gateway's.
 */

interface Anchor { state: string; hash: string; root: string | null; leaf_index: number | null; tree_size: number | null; proof: string[] }
interface Event { seq: number; type: string; at: string; data: Record<string, any>; canonical: string; prev_hash: string; hash: string; anchor: Anchor }
interface Plan {
  id: string;
  name: string;
  status: string;
  deadline_at: string;
  warned_at: string | null;
  release_earliest_at: string | null;
  released_at: string | null;
  confirmations: number;
  quorum: number | null;
  beneficiary_count: number;
  attester_count: number;
  object_count: number;
  note_bytes: number;
  beneficiaries: Array<{ wallet: string; label: string | null; claim_link: string; claimed_at: string | null }>;
  attesters: Array<{ wallet: string; confirmed_at: string | null }>;
  objects: Array<{ id: string; name: string; content_type: string; byte_len: number; sha256: string }>;
  events: Event[];
  head_hash: string;
}
type Created = Plan & { claim_links: Array<{ wallet: string; token: string; claim_url: string; api_url: string }> };

const HOUR = 3600;
const DAY = 86_400;
const sha256 = (b: Buffer | string) => `0x${createHash('sha256').update(b).digest('hex')}`;

let t: Awaited<ReturnType<typeof startTestGateway>>;
type Who = Awaited<ReturnType<typeof t.signIn>>;
let owner: Who, heir: Who, heir2: Who, att1: Who, att2: Who, att3: Who, stranger: Who;

beforeAll(async () => {
  // Sessions outlive the months the clock moves through.
  t = await startTestGateway({ env: { SVC_LEGACY_MAX_ACTIVE_PLANS: '3', SVC_SESSION_TTL_SECONDS: String(10 * 365 * DAY) } });
  const who = await Promise.all(Array.from({ length: 7 }, () => t.signIn()));
  [owner, heir, heir2, att1, att2, att3, stranger] = who as [Who, Who, Who, Who, Who, Who, Who];
});
afterAll(async () => t?.close());
// Each test's plans have their own owner: the live-plan limit (3) counts per account, and no test sees another's.
beforeEach(async () => {
  owner = await t.signIn();
});

const fileA = randomBytes(3000);
const fileB = Buffer.from('%PDF-1.7 pretend\n');
const note = 'The key is in the blue box. Ключ — в синей коробке. 🔑';

function planBody(extra: Record<string, unknown> = {}) {
  return {
    name: 'For the family',
    note,
    files: [
      { name: 'keys.bin', content_b64: fileA.toString('base64') },
      { name: 'will.pdf', content_type: 'application/pdf', content_b64: fileB.toString('base64') },
    ],
    checkin_interval_seconds: 30 * DAY,
    grace_seconds: 2 * DAY,
    beneficiaries: [{ wallet: heir.account.address, label: 'Ana' }, { wallet: heir2.account.address }],
    attesters: [{ wallet: att1.account.address }, { wallet: att2.account.address }, { wallet: att3.account.address }],
    quorum: 2,
    ...extra,
  };
}

const create = (body: unknown, c: SvcClient = owner.client) => c.request<Created>('POST', '/v1/legacy/plans', { body });
const detail = (id: string) => owner.client.request<Plan>('GET', `/v1/legacy/plans/${id}`);
const attest = (c: SvcClient, id: string, body?: unknown) => c.request<{ confirmations: number; confirmed_at: string; status: string }>('POST', `/v1/legacy/plans/${id}/attest`, body === undefined ? {} : { body });
const publicClaim = (token: string) => fetch(`${t.url}/v1/legacy/claim/${token}`);
const tick = async () => expect(await t.gw.leader.runAllOnce()).toBe(true);
const advance = (seconds: number) => t.clock.advance(seconds * 1000);
const db = () => t.gw.database.db;

/** Moves the clock past `plan`'s deadline and runs the lifecycle: the plan warns. */
async function toWarning(plan: Plan): Promise<void> {
  advance((new Date(plan.deadline_at).getTime() - t.clock.now().getTime()) / 1000 + 1);
  await tick();
  expect((await detail(plan.id)).status).toBe('warning');
}

/** Releases `plan`: it warns, att1 and att2 confirm (the quorum of 2), the grace period runs out. */
async function release(plan: Plan): Promise<void> {
  await toWarning(plan);
  for (const a of [att1, att2]) await attest(a.client, plan.id);
  advance(2 * DAY + 1);
  await tick();
  expect((await detail(plan.id)).status).toBe('released');
}

/** The beneficiary's claims on `plan` (other tests' plans name the same wallets). */
const claimsOn = async (c: SvcClient, planId: string) => (await c.request<{ claims: Array<{ plan_id: string; wallet: string; claimed_at: string | null; objects: number }> }>('GET', '/v1/legacy/claims')).claims.filter((x) => x.plan_id === planId);

/** The chain as a third party checks it: each record's sha256, its seq and its link to the previous hash. */
function expectChain(p: Plan) {
  let prev = `0x${'0'.repeat(64)}`;
  p.events.forEach((e, i) => {
    const rec = JSON.parse(e.canonical);
    expect(rec).toEqual({ v: 1, plan_id: p.id, seq: i, type: e.type, at: e.at, data: e.data, prev_hash: prev });
    expect(e.hash).toBe(sha256(e.canonical));
    expect(e.prev_hash).toBe(prev);
    prev = e.hash;
  });
  expect(p.head_hash).toBe(prev);
}

describe('a plan through warning, check-in, quorum and release (each test takes its own plan as far as it needs)', () => {
  it('creates the plan: content sealed, claim links shown once and stored hashed, a created event chained', async () => {
    const plan = await create(planBody());
    expect(plan).toMatchObject({ status: 'active', name: 'For the family', quorum: 2, beneficiary_count: 2, attester_count: 3, object_count: 2, confirmations: 0 });
    expect(plan.note_bytes).toBe(Buffer.byteLength(note));
    expect(new Date(plan.deadline_at).getTime()).toBe(t.clock.now().getTime() + 30 * DAY * 1000);
    expect(plan.objects.map((o) => [o.name, o.content_type, o.byte_len, o.sha256])).toEqual([
      ['keys.bin', 'application/octet-stream', fileA.length, sha256(fileA)],
      ['will.pdf', 'application/pdf', fileB.length, sha256(fileB)],
    ]);
    expect(plan.claim_links).toHaveLength(2);
    for (const l of plan.claim_links) {
      expect(l.token).toMatch(/^lgc_[A-Za-z0-9_-]{43}$/);
      expect(l.claim_url).toBe(`${t.url}/legacy/claim/${l.token}`);
    }
    expect(plan.events.map((e) => e.type)).toEqual(['created']);
    expectChain(plan);
    // The detail never shows content or tokens.
    const shown = JSON.stringify(await detail(plan.id));
    expect(shown).not.toContain('blue box');
    expect(shown).not.toContain(plan.claim_links[0]!.token);
    expect(shown).not.toContain('claim_links');
    // At rest: sealed note and files, tokens as sha256.
    const row = await db().selectFrom('legacy_plans').selectAll().where('id', '=', plan.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.note_sealed!).toString('latin1')).not.toContain('blue box');
    const objs = await db().selectFrom('legacy_objects').selectAll().where('plan_id', '=', plan.id).execute();
    for (const o of objs) expect(Buffer.from(o.content_sealed!).includes(fileB)).toBe(false);
    const hashes = (await db().selectFrom('legacy_parties').select('claim_token_hash').where('plan_id', '=', plan.id).where('role', '=', 'beneficiary').orderBy('position').execute()).map((r) => r.claim_token_hash);
    expect(hashes).toEqual(plan.claim_links.map((l) => createHash('sha256').update(l.token).digest('hex')));
  });

  it('answers the public claim link with plan name, wallet required and status', async () => {
    const plan = await create(planBody());
    const res = await publicClaim(plan.claim_links[0]!.token);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ plan_name: 'For the family', wallet_required: heir.account.address, status: 'active' });
  });

  it('refuses confirmations while active, and from a wallet that is not a named attester: nothing recorded', async () => {
    const plan = await create(planBody());
    const e = await expectApiError(attest(att1.client, plan.id), 409, 'conflict');
    expect(e.extra.reason).toBe('not_in_warning');
    await expectApiError(attest(stranger.client, plan.id), 404, 'not_found');
    await expectApiError(attest(heir.client, plan.id), 404, 'not_found'); // a beneficiary is no attester
    const p = await detail(plan.id);
    expect(p).toMatchObject({ status: 'active', confirmations: 0 });
    expect(p.events.map((e) => e.type)).toEqual(['created']);
    expect(p.attesters.every((a) => a.confirmed_at === null)).toBe(true);
  });

  it('warns at the deadline; a confirmation counts; a check-in clears warning and confirmations', async () => {
    const plan = await create(planBody());
    advance(30 * DAY - 60);
    await tick();
    expect((await detail(plan.id)).status).toBe('active');
    advance(61);
    await tick();
    let p = await detail(plan.id);
    expect(p.status).toBe('warning');
    expect(p.release_earliest_at).toBe(new Date(new Date(p.warned_at!).getTime() + 2 * DAY * 1000).toISOString());
    expect((await attest(att1.client, plan.id)).confirmations).toBe(1);
    expect((await attest(att1.client, plan.id)).confirmations).toBe(1); // idempotent within a warning
    await expectApiError(attest(stranger.client, plan.id), 404, 'not_found');
    // The attester sees the plan and its confirmation.
    const list = await att1.client.request<{ plans: Array<{ id: string; status: string; your_confirmation: { wallet: string; confirmed_at: string | null } }> }>('GET', '/v1/legacy/attesting');
    expect(list.plans.find((x) => x.id === plan.id)).toMatchObject({ status: 'warning', your_confirmation: { wallet: att1.account.address } });
    expect(list.plans.find((x) => x.id === plan.id)!.your_confirmation.confirmed_at).not.toBeNull();

    advance(HOUR);
    p = await owner.client.request<Plan>('POST', `/v1/legacy/plans/${plan.id}/checkin`);
    expect(p).toMatchObject({ status: 'active', warned_at: null, confirmations: 0 });
    expect(new Date(p.deadline_at).getTime()).toBe(t.clock.now().getTime() + 30 * DAY * 1000);
    expect(p.attesters.every((a) => a.confirmed_at === null)).toBe(true);
    expect(p.events.map((e) => e.type)).toEqual(['created', 'warning', 'attested', 'checked_in']);
    expect(p.events[3]!.data).toMatchObject({ warning_cleared: true, confirmations_cleared: 1 });
    expectChain(p);
  });

  it('releases once the grace period has run and the quorum is met, exactly once', async () => {
    const plan = await create(planBody());
    advance(30 * DAY + 1);
    await tick();
    expect((await detail(plan.id)).status).toBe('warning');
    await attest(att1.client, plan.id);
    advance(2 * DAY + 1);
    await tick(); // grace over, one confirmation of two: still in warning
    let p = await detail(plan.id);
    expect(p).toMatchObject({ status: 'warning', confirmations: 1 });
    // Nothing to claim yet.
    await expectApiError(heir.client.request('POST', `/v1/legacy/claims/${plan.id}/open`), 404, 'not_found');
    expect(await claimsOn(heir.client, plan.id)).toEqual([]);
    expect((await attest(att2.client, plan.id)).confirmations).toBe(2);
    // Several ticks at once (on Postgres: concurrent transactions on the plan's row lock) release it once.
    const outcomes = await Promise.all([1, 2, 3].map(() => t.gw.legacy.lifecycle.tick()));
    expect(outcomes.reduce((n, o) => n + o.released, 0)).toBe(1);
    await tick();
    p = await detail(plan.id);
    expect(p.status).toBe('released');
    expect(p.events.filter((e) => e.type === 'released')).toHaveLength(1);
    expect(p.events.at(-1)!.data).toEqual({ confirmations: 2, quorum: 2 });
    expectChain(p);
    // Released is final for the owner's check-in and content; attesters have nothing more to confirm.
    await expectApiError(owner.client.request('POST', `/v1/legacy/plans/${plan.id}/checkin`), 409, 'conflict');
    await expectApiError(owner.client.request('PUT', `/v1/legacy/plans/${plan.id}/content`, { body: { note: 'x' } }), 409, 'conflict');
    await expectApiError(attest(att3.client, plan.id), 409, 'conflict');
    expect(await (await publicClaim(plan.claim_links[1]!.token)).json()).toMatchObject({ status: 'released', wallet_required: heir2.account.address });
  });

  it('is opened by the beneficiary wallet session only; `claimed` chained once', async () => {
    const plan = await create(planBody());
    await release(plan);
    expect(await claimsOn(heir.client, plan.id)).toEqual([expect.objectContaining({ plan_id: plan.id, wallet: heir.account.address, claimed_at: null, objects: 2 })]);
    expect((await stranger.client.request<{ claims: unknown[] }>('GET', '/v1/legacy/claims')).claims).toEqual([]);
    // A wrong wallet (the owner's, a stranger's, an attester's) finds nothing.
    for (const w of [stranger, owner, att1]) await expectApiError(w.client.request('POST', `/v1/legacy/claims/${plan.id}/open`), 404, 'not_found');
    await expectApiError(stranger.client.request('GET', `/v1/legacy/claims/${plan.id}/objects/${plan.objects[0]!.id}`), 404, 'not_found');
    expect((await detail(plan.id)).events.filter((e) => e.type === 'claimed')).toEqual([]); // the refusals chained nothing

    const opened = await heir.client.request<{ note: string; claimed_at: string; wallet: string; objects: Array<{ id: string; sha256: string }> }>('POST', `/v1/legacy/claims/${plan.id}/open`);
    expect(opened.note).toBe(note);
    expect(opened.wallet).toBe(heir.account.address);
    expect(opened.objects.map((o) => o.sha256)).toEqual([sha256(fileA), sha256(fileB)]);
    advance(60);
    const again = await heir.client.request<{ claimed_at: string }>('POST', `/v1/legacy/claims/${plan.id}/open`);
    expect(again.claimed_at).toBe(opened.claimed_at);
    const f = await heir.client.request<{ content_b64: string; name: string; sha256: string }>('GET', `/v1/legacy/claims/${plan.id}/objects/${opened.objects[0]!.id}`);
    expect(Buffer.from(f.content_b64, 'base64').equals(fileA)).toBe(true);
    expect(f.sha256).toBe(sha256(fileA));

    const p = await detail(plan.id);
    expect(p.events.filter((e) => e.type === 'claimed').map((e) => e.data)).toEqual([{ beneficiary: heir.account.address }]);
    expect(p.beneficiaries.map((b) => b.claimed_at !== null)).toEqual([true, false]);
    expectChain(p);
  });

  it('anchors every chained event: inclusion proofs recompute to the batch root', async () => {
    const plan = await create(planBody());
    await toWarning(plan);
    await attest(att1.client, plan.id);
    await owner.client.request('POST', `/v1/legacy/plans/${plan.id}/checkin`);
    await tick(); // the anchors loop gathers the queued event hashes into a batch
    const p = await detail(plan.id);
    expect(p.events.map((e) => e.type)).toEqual(['created', 'warning', 'attested', 'checked_in']);
    for (const e of p.events) {
      expect(e.anchor.hash).toBe(e.hash);
      expect(e.anchor.root).not.toBeNull();
      const root = rootFromPath(buf(e.hash), e.anchor.leaf_index!, e.anchor.tree_size!, e.anchor.proof.map(buf));
      expect(`0x${root!.toString('hex')}`).toBe(e.anchor.root);
    }
  });
});

describe('a cancelled plan', () => {
  it('destroys the content, kills the links (404 like an unknown link, page included) and keeps the history', async () => {
    const plan = await create(planBody({ attesters: undefined, quorum: undefined }));
    const token = plan.claim_links[0]!.token;
    expect((await publicClaim(token)).status).toBe(200);
    const cancelled = await owner.client.request<Plan>('POST', `/v1/legacy/plans/${plan.id}/cancel`);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.events.map((e) => e.type)).toEqual(['created', 'cancelled']);
    expect(cancelled.beneficiaries.every((b) => b.claim_link === 'killed')).toBe(true);
    expectChain(cancelled);
    expect((await owner.client.request<Plan>('POST', `/v1/legacy/plans/${plan.id}/cancel`)).events).toHaveLength(2); // idempotent

    const killed = await publicClaim(token);
    const unknown = await publicClaim(`lgc_${randomBytes(32).toString('base64url')}`);
    expect([killed.status, unknown.status]).toEqual([404, 404]);
    const strip = async (r: Response) => {
      const b = (await r.json()) as { error: Record<string, unknown> };
      delete b.error.request_id;
      return b;
    };
    expect(await strip(killed)).toEqual(await strip(unknown));
    const [pageKilled, pageUnknown] = await Promise.all([fetch(`${t.url}/legacy/claim/${token}`), fetch(`${t.url}/legacy/claim/lgc_unknown`)]);
    expect([pageKilled.status, pageUnknown.status]).toEqual([404, 404]);
    const html = (r: Response) => r.text().then((s) => s.replace(/nonce-[^']+'|nonce="[^"]+"/g, 'N'));
    expect(await html(pageKilled)).toBe(await html(pageUnknown));

    const row = await db().selectFrom('legacy_plans').selectAll().where('id', '=', plan.id).executeTakeFirstOrThrow();
    expect(row.note_sealed).toBeNull();
    const objs = await db().selectFrom('legacy_objects').select(['content_sealed', 'sha256']).where('plan_id', '=', plan.id).execute();
    expect(objs.map((o) => o.content_sealed)).toEqual([null, null]);
    expect(objs.map((o) => o.sha256)).toEqual([sha256(fileA), sha256(fileB)]);
    const tokens = await db().selectFrom('legacy_parties').select('claim_token_hash').where('plan_id', '=', plan.id).execute();
    expect(tokens.every((x) => x.claim_token_hash === null)).toBe(true);

    await expectApiError(owner.client.request('POST', `/v1/legacy/plans/${plan.id}/checkin`), 409, 'conflict');
    // It never warns or releases.
    advance(400 * DAY);
    await tick();
    expect((await detail(plan.id)).status).toBe('cancelled');
  });
});

describe('owner routes', () => {
  it('replaces content: earlier ciphertexts destroyed, metadata kept, a content_replaced event chained', async () => {
    const plan = await create(planBody({ attesters: undefined, quorum: undefined }));
    const p = await owner.client.request<Plan>('PUT', `/v1/legacy/plans/${plan.id}/content`, { body: { note: 'new note', files: [{ name: 'only.txt', content_type: 'text/plain', content_b64: Buffer.from('hi').toString('base64') }] } });
    expect(p.objects.map((o) => o.name)).toEqual(['only.txt']);
    expect(p.note_bytes).toBe(8);
    expect(p.events.at(-1)).toMatchObject({ type: 'content_replaced', data: { version: 2, objects: 1, note_bytes: 8 } });
    const objs = await db().selectFrom('legacy_objects').select(['name', 'content_sealed', 'replaced_at']).where('plan_id', '=', plan.id).orderBy('version').orderBy('position').execute();
    expect(objs.map((o) => [o.name, o.content_sealed === null, o.replaced_at !== null])).toEqual([['keys.bin', true, true], ['will.pdf', true, true], ['only.txt', false, false]]);
    await owner.client.request('POST', `/v1/legacy/plans/${plan.id}/cancel`);
  });

  it("lists the account's plans with the live-plan limit and the custody model; another account's plan is not found", async () => {
    const who = await t.signIn();
    const body = planBody({ attesters: undefined, quorum: undefined });
    const live = await create(body, who.client);
    const gone = await create(body, who.client);
    await who.client.request('POST', `/v1/legacy/plans/${gone.id}/cancel`);
    const list = await who.client.request<{ plans: Plan[]; max_active_plans: number; custody: string }>('GET', '/v1/legacy/plans');
    expect(list.max_active_plans).toBe(3);
    expect(list.custody).toContain('AES-256-GCM');
    expect(list.plans.map((p) => [p.id, p.status])).toEqual([[gone.id, 'cancelled'], [live.id, 'active']]);
    const id = live.id;
    await expectApiError(stranger.client.request('GET', `/v1/legacy/plans/${id}`), 404, 'not_found');
    await expectApiError(stranger.client.request('POST', `/v1/legacy/plans/${id}/cancel`), 404, 'not_found');
  });

  it('keeps at most max_active_plans live plans per account', async () => {
    const who = await t.signIn();
    const body = planBody({ attesters: undefined, quorum: undefined });
    const made = [await create(body, who.client), await create(body, who.client), await create(body, who.client)];
    const e = await expectApiError(create(body, who.client), 409, 'conflict');
    expect(e.extra).toMatchObject({ reason: 'plan_limit', limit: 3 });
    await who.client.request('POST', `/v1/legacy/plans/${made[0]!.id}/cancel`);
    await create(body, who.client);
  });

  it('refuses bad input with a 4xx naming the field, writing nothing', async () => {
    const rows = async (table: 'legacy_plans' | 'legacy_objects' | 'legacy_parties') => Number((await db().selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const count = async () => [await rows('legacy_plans'), await rows('legacy_objects'), await rows('legacy_parties')];
    const before = await count();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ quorum: 4 }, 'quorum'],
      [{ attesters: undefined, quorum: 1 }, 'quorum'],
      [{ beneficiaries: [{ wallet: heir.account.address }, { wallet: heir.account.address.toLowerCase() }] }, 'beneficiaries[1].wallet'],
      [{ attesters: [{ wallet: heir.account.address }] , quorum: 1 }, 'attesters[0].wallet'],
      [{ beneficiaries: [{ wallet: '0x1234' }] }, 'beneficiaries[0].wallet'],
      [{ beneficiaries: [] }, 'beneficiaries'],
      [{ checkin_interval_seconds: 10 }, 'checkin_interval_seconds'],
      [{ deadline: new Date(t.clock.now().getTime() - 1000).toISOString() }, 'deadline'],
      [{ files: [{ name: 'x', content_b64: 'not base64!' }] }, 'files[0].content_b64'],
      [{ files: [{ name: 'big', content_b64: Buffer.alloc(1024 * 1024 + 1).toString('base64') }] }, 'files[0].content_b64'],
      [{ note: '' }, 'note'],
      [{ salt: 'x' }, 'salt'],
    ];
    for (const [extra, param] of cases) {
      const e = await expectApiError(create(planBody(extra)), 400, 'invalid_request');
      expect(e.param, JSON.stringify(extra).slice(0, 80)).toBe(param);
    }
    expect(await count()).toEqual(before);
  });
});
