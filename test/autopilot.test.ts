import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { canonicalize, sha256Hex } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';
import { expectApiError } from './support/expect-error.ts';
import { call } from './support/call.ts';

/**
 * Autopilot end to end against a local OpenAI-compatible server that answers per model: an account's engine
 * traffic on a dear model is analysed (opt-in, every evaluation call metered under its key), the cheaper
 * catalog models are evaluated against the current build on the account's own eval suite; the one that passes
 * is adopted by the owner and published as a new engine version that then serves the calls, the one that
 * regresses is refused for everyone; a member's session cannot adopt; a directly called model is evaluated on
 * replay capsules and adopted under a slug; bad input writes and calls nothing.
 */

let t: TestGateway;
let up: ScriptedUpstream;
/** What each model answers. */
const ANSWERS: Record<string, string> = { big: 'The capital of France is Paris.', small: 'The capital of France is Paris.', tiny: 'I am not sure, maybe Lyon.' };
const PRICES = { big: [10_000_000, 20_000_000], small: [2_000_000, 4_000_000], tiny: [1_000_000, 1_000_000] } as const;

const api = <T = any>(c: SvcClient, method: string, path: string, body?: unknown) => c.request<T>(method, path, body === undefined ? {} : { body });
const count = async (table: 'autopilot_proposals' | 'engine_builds') => Number((await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (_req, body, res) => {
    const content = ANSWERS[body.model] ?? 'unknown model';
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 } }),
    );
  };
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_INFERENCE_TIMEOUT_SECONDS: '5',
      SVC_PROVIDERS: JSON.stringify([
        {
          name: 'local',
          base_url: up.url,
          models: [
            ...Object.entries(PRICES).map(([id, [i, o]]) => ({ id, input_micro_usd_per_mtok: i, output_micro_usd_per_mtok: o, max_output_tokens: 1000 })),
            { id: 'embed', input_micro_usd_per_mtok: 1, embedding: true },
          ],
        },
      ]),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

async function account() {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 50_000_000, 'grant', `grant-${s.accountId}`);
  const key = await api<{ id: string; key: string }>(s.client, 'POST', '/v1/keys', { scopes: ['inference'] });
  return { ...s, keyId: key.id, oa: new OpenAI({ apiKey: key.key, baseURL: `${t.url}/v1`, maxRetries: 0 }) };
}

describe('autopilot', () => {
  let owner: Awaited<ReturnType<typeof account>>;
  let build: { id: string; spec: { system_prompt_sha256: string } };
  let suiteId: string;
  let analysis: any;
  const byCandidate = (m: string) => analysis.proposals.find((p: any) => p.candidate_model === m);

  beforeAll(async () => {
    owner = await account();
    build = await api(owner.client, 'POST', '/v1/engine/builds', { slug: 'geo', model: 'big', system_prompt: 'You answer geography questions.', temperature: 0 });
    await api(owner.client, 'POST', `/v1/engine/builds/${build.id}/publish`);
    for (let i = 0; i < 3; i++) await owner.oa.chat.completions.create({ model: 'engine/geo', messages: [{ role: 'user', content: `Question ${i}` }] });
    suiteId = (await api(owner.client, 'POST', '/v1/evals', { name: 'capitals', model: 'big', cases: [{ messages: [{ role: 'user', content: 'What is the capital of France?' }], assertions: [{ type: 'contains', value: 'Paris' }] }] })).id;
  });

  it('analyses the metered traffic and evaluates each cheaper model against the current build on the account\'s suite', async () => {
    up.seen.length = 0;
    analysis = await api(owner.client, 'POST', '/v1/autopilot/analyze', { opt_in: true, key_id: owner.keyId, repeat: 2 });
    expect(analysis.usage).toEqual([{ kind: 'engine', target: 'engine/geo', requests: 3, cost_micro_usd: 3 * (20 * 10 + 8 * 20), input_tokens: 60, output_tokens: 24 }]);
    expect(analysis.proposals.map((p: any) => p.candidate_model)).toEqual(['tiny', 'small']); // cheapest first
    // Every evaluation call ran the build's configuration: its prompt first, its parameters; 3 configurations x 2 attempts.
    expect(up.seen).toHaveLength(6);
    for (const s of up.seen) expect(s.body).toMatchObject({ temperature: 0, messages: [{ role: 'system', content: 'You answer geography questions.' }, { role: 'user', content: 'What is the capital of France?' }] });
    const small = byCandidate('small');
    expect(small).toMatchObject({ state: 'open', regression: false, target: { kind: 'engine', name: 'engine/geo', build_id: build.id }, current_model: 'big' });
    expect(small.evidence).toMatchObject({
      usage: { window_days: 30, requests: 3, cost_micro_usd: 1080 },
      costs: { current: { model: 'big', projected_micro_usd: 1080 }, candidate: { model: 'small', projected_micro_usd: 60 * 2 + 24 * 4 }, savings_micro_usd: 1080 - 216 },
      suites: [{ suite_id: suiteId, name: 'capitals', cases: 1, repeat: 2, baseline: { model: 'big', pass_rate: 1, attempts: 2 }, candidate: { model: 'small', pass_rate: 1, attempts: 2 }, regressed_cases: [], regression: false }],
      capsules: { samples: 0 },
      sample_size: { suite_attempts: 2, capsules: 0 },
      regression: false,
    });
    expect(small.evidence_sha256).toBe(sha256Hex(canonicalize(small.evidence)));
    expect(byCandidate('tiny')).toMatchObject({ regression: true, evidence: { suites: [{ candidate: { pass_rate: 0 }, regressed_cases: [0], regression: true }] } });
    expect(analysis.evaluation_cost_micro_usd).toBeGreaterThan(0);
    // The evaluation calls were metered under the key, as the analysis route.
    await t.gw.services.metering.settledAll();
    const events = await t.gw.database.db.selectFrom('usage_events').select(['route', 'key_id']).where('account_id', '=', owner.accountId).where('route', '=', 'POST /v1/autopilot/analyze').execute();
    expect(events).toHaveLength(6);
    expect(new Set(events.map((e) => e.key_id))).toEqual(new Set([owner.keyId]));
    expect((await api(owner.client, 'GET', '/v1/autopilot/proposals')).proposals.map((p: any) => p.id)).toEqual(expect.arrayContaining([small.id, byCandidate('tiny').id]));
    expect(await api(owner.client, 'GET', `/v1/autopilot/proposals/${small.id}`)).toEqual(small);
  });

  it('refuses to adopt a proposal whose evidence says regression, for everyone, writing nothing', async () => {
    const builds = await count('engine_builds');
    const tiny = byCandidate('tiny');
    const e = await expectApiError(api(owner.client, 'POST', `/v1/autopilot/proposals/${tiny.id}/adopt`), 409, 'conflict');
    expect(e.message).toContain('regression');
    expect(e.body?.error.reason).toBe('regression');
    expect(await count('engine_builds')).toBe(builds);
    expect((await api(owner.client, 'GET', `/v1/autopilot/proposals/${tiny.id}`)).state).toBe('open');
    expect((await api(owner.client, 'GET', '/v1/engine/resolve/geo')).configuration.model).toBe('big');
  });

  it('holds a member back from adopting; the owner adopts and engine/geo serves the cheaper model', async () => {
    const org = await api(owner.client, 'POST', '/v1/orgs', { name: 'Geo Inc' });
    const member = await t.signIn();
    const admin = await t.signIn();
    for (const [who, role] of [[member, 'member'], [admin, 'admin']] as const) {
      const inv = await api(owner.client, 'POST', `/v1/orgs/${org.id}/invites`, { role, account_id: who.accountId });
      await api(who.client, 'POST', `/v1/orgs/invites/${inv.token}/accept`);
    }
    const asMember = t.client.withCredential({ kind: 'session', token: (await api(member.client, 'POST', `/v1/orgs/${org.id}/switch`)).token });
    const small = byCandidate('small');
    expect((await api(asMember, 'GET', `/v1/autopilot/proposals/${small.id}`)).id).toBe(small.id); // members read
    await expectApiError(api(asMember, 'POST', `/v1/autopilot/proposals/${small.id}/adopt`), 403, 'forbidden');
    await expectApiError(api(asMember, 'POST', '/v1/autopilot/analyze', { opt_in: true, key_id: owner.keyId }), 403, 'forbidden');
    const asAdmin = t.client.withCredential({ kind: 'session', token: (await api(admin.client, 'POST', `/v1/orgs/${org.id}/switch`)).token });
    await expectApiError(api(asAdmin, 'POST', `/v1/autopilot/proposals/${byCandidate('tiny').id}/adopt`), 409, 'conflict'); // no override for an admin either
    expect((await api(owner.client, 'GET', `/v1/autopilot/proposals/${small.id}`)).state).toBe('open');

    const adopted = await api(owner.client, 'POST', `/v1/autopilot/proposals/${small.id}/adopt`);
    expect(adopted).toMatchObject({ state: 'adopted', decided_by: owner.accountId, adopted_build_id: expect.stringMatching(/^eng_/) });
    const v2 = await api(owner.client, 'GET', `/v1/engine/builds/${adopted.adopted_build_id}`);
    expect(v2).toMatchObject({ slug: 'geo', version: 2, state: 'published', model: 'small', origin: 'autopilot', proposal_id: small.id, parameters: { temperature: 0 }, system_prompt_sha256: build.spec.system_prompt_sha256 });
    expect((await api(owner.client, 'GET', `/v1/engine/builds/${build.id}`)).state).toBe('retired');
    up.seen.length = 0;
    await owner.oa.chat.completions.create({ model: 'engine/geo', messages: [{ role: 'user', content: 'And Spain?' }] });
    expect(up.seen[0]!.body).toMatchObject({ model: 'small', messages: [{ role: 'system', content: 'You answer geography questions.' }, { role: 'user', content: 'And Spain?' }] });
    expect(await api(owner.client, 'POST', `/v1/autopilot/proposals/${small.id}/adopt`)).toMatchObject({ state: 'adopted', adopted_build_id: adopted.adopted_build_id }); // idempotent

    const tiny = byCandidate('tiny');
    expect(await api(asAdmin, 'POST', `/v1/autopilot/proposals/${tiny.id}/reject`)).toMatchObject({ state: 'rejected', decided_by: admin.accountId });
    await expectApiError(api(owner.client, 'POST', `/v1/autopilot/proposals/${tiny.id}/adopt`), 409, 'conflict');
    await expectApiError(api(owner.client, 'POST', `/v1/autopilot/proposals/${small.id}/reject`), 409, 'conflict');
  });

  it('evaluates a directly called model on replay capsules and adopts it under a slug', async () => {
    const a = await account();
    await a.oa.chat.completions.create({ model: 'big', messages: [{ role: 'user', content: 'What is the capital of France?' }] });
    const capsule = await api(a.client, 'POST', '/v1/replay/capsules', { confirm_seal: true, key_id: a.keyId, request: { model: 'big', messages: [{ role: 'user', content: 'What is the capital of France?' }], temperature: 0 } });
    const r = await api(a.client, 'POST', '/v1/autopilot/analyze', { opt_in: true, key_id: a.keyId, max_candidates: 5 });
    expect(r.usage).toEqual([expect.objectContaining({ kind: 'model', target: 'big', requests: 1 })]);
    const small = r.proposals.find((p: any) => p.candidate_model === 'small');
    expect(small).toMatchObject({ regression: false, target: { kind: 'model', name: 'big', build_id: null }, evidence: { suites: [], capsules: { samples: 1, baseline_matches: 1, candidate_matches: 1, results: [{ capsule_id: capsule.id, baseline_matched: true, candidate_matched: true }] } } });
    expect(r.proposals.find((p: any) => p.candidate_model === 'tiny')).toMatchObject({ regression: true, evidence: { capsules: { candidate_matches: 0, regression: true } } });
    await expectApiError(api(a.client, 'POST', `/v1/autopilot/proposals/${small.id}/adopt`), 400, 'invalid_request');
    const adopted = await api(a.client, 'POST', `/v1/autopilot/proposals/${small.id}/adopt`, { slug: 'cheap-geo' });
    expect(await api(a.client, 'GET', '/v1/engine/resolve/cheap-geo')).toMatchObject({ build_id: adopted.adopted_build_id, version: 1, configuration: { model: 'small', system_prompt_sha256: null } });
  });

  it('skips targets it has no evidence for or nothing cheaper than, and refuses bad input writing nothing', async () => {
    const a = await account();
    await a.oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] });
    await a.oa.chat.completions.create({ model: 'small', messages: [{ role: 'user', content: 'hi' }] });
    const r = await api(a.client, 'POST', '/v1/autopilot/analyze', { opt_in: true, key_id: a.keyId });
    expect(r.proposals).toEqual([]);
    expect(r.skipped).toEqual([
      { kind: 'model', target: 'small', reason: expect.stringMatching(/^no_evidence/) },
      { kind: 'model', target: 'tiny', reason: expect.stringMatching(/^no_cheaper_model/) },
    ]);
    const proposals = await count('autopilot_proposals');
    up.seen.length = 0;
    const bad = async (body: Record<string, unknown>, param: string) => {
      const res = await call(a.client, 'POST', '/v1/autopilot/analyze', body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(JSON.stringify(res.body.error)).toContain(param);
    };
    await bad({ key_id: a.keyId }, 'opt_in');
    await bad({ opt_in: false, key_id: a.keyId }, 'opt_in');
    await bad({ opt_in: true }, 'key_id');
    await bad({ opt_in: true, key_id: 'key_nope' }, 'key_id');
    await bad({ opt_in: true, key_id: a.keyId, suite_ids: [suiteId] }, 'suite_ids[0]'); // another account's suite
    await bad({ opt_in: true, key_id: a.keyId, window_days: 0 }, 'window_days');
    await bad({ opt_in: true, key_id: a.keyId, capsule_ids: ['cap_nope'] }, 'capsule_ids[0]');
    expect(await count('autopilot_proposals')).toBe(proposals);
    expect(up.seen).toEqual([]);
    await expectApiError(api(a.client, 'GET', `/v1/autopilot/proposals/${byCandidate('small').id}`), 404, 'not_found');
    await expectApiError(api(a.client, 'POST', `/v1/autopilot/proposals/${byCandidate('small').id}/adopt`), 404, 'not_found');
  });
});
