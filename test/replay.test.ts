import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import type { SvcClient } from '@svc/shared/client';
import { closeInferenceEnv, startInferenceEnv, storedReceipt, user, type InferenceEnv } from './support/inference-env.ts';
import { fundedKey } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { call } from './support/call.ts';

/**
 * Replay capsules end to end against a local OpenAI-compatible server that can switch its answer: a request
 * recorded (sealed, never returned) runs once for its baseline fingerprint; replays run through the metered
 * path with receipts and report changed: false while the upstream answers the same and changed: true once it
 * answers otherwise, never the text; a deleted capsule answers 410; bad input writes nothing.
 */

let env: InferenceEnv;
let acct: Awaited<ReturnType<typeof fundedKey>>;
let keyId: string;
const SECRET_PROMPT = 'Summarise our confidential merger plan codenamed BLUEHERON.';

const api = <T = any>(c: SvcClient, method: string, path: string, body?: unknown) => c.request<T>(method, path, body === undefined ? {} : { body });
const count = async (table: 'replay_capsules' | 'replay_runs') => Number((await env.t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

beforeAll(async () => {
  env = await startInferenceEnv();
  acct = await fundedKey(env.t, 10_000_000);
  keyId = (await api<{ id: string }>(acct.client, 'POST', '/v1/keys', { scopes: ['inference'] })).id;
});
afterAll(() => closeInferenceEnv(env));
beforeEach(() => {
  env.up.reset();
  env.up.requests.length = 0;
});

describe('replay capsules', () => {
  let capsule: any;

  it('records a request: runs it once for the baseline, seals it, never returns it', async () => {
    capsule = await api(acct.client, 'POST', '/v1/replay/capsules', { confirm_seal: true, key_id: keyId, request: { model: 'test-chat', messages: user(SECRET_PROMPT), max_tokens: 50 } });
    expect(capsule).toMatchObject({ object: 'replay.capsule', model: 'test-chat', key_id: keyId, request_destroyed: false, replay_count: 0, baseline: { output_sha256: expect.stringMatching(/^[0-9a-f]{64}$/), receipt_id: expect.stringMatching(/^req_/) } });
    expect(env.up.requests).toHaveLength(1);
    expect(env.up.requests[0]!.body.messages).toEqual(user(SECRET_PROMPT));
    const text = JSON.stringify(capsule) + JSON.stringify(await api(acct.client, 'GET', '/v1/replay/capsules')) + JSON.stringify(await api(acct.client, 'GET', `/v1/replay/capsules/${capsule.id}`));
    expect(text).not.toContain('BLUEHERON');
    expect(text).not.toContain('quick brown fox');
    const row = await env.t.gw.database.db.selectFrom('replay_capsules').selectAll().where('id', '=', capsule.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.request_sealed!).toString('utf8')).not.toContain('BLUEHERON');
    const r = await storedReceipt(env.t, capsule.baseline.receipt_id);
    expect(r).toMatchObject({ route: 'POST /v1/replay/capsules', model: 'test-chat' });
  });

  it('replays through the metered path: unchanged while the upstream answers the same, changed once it does not', async () => {
    const same = await api(acct.client, 'POST', `/v1/replay/capsules/${capsule.id}/replay`, {});
    expect(same).toMatchObject({ object: 'replay', capsule_id: capsule.id, changed: false, output_sha256: capsule.baseline.output_sha256, model: 'test-chat', key_id: keyId });
    expect(env.up.requests[0]!.body.messages).toEqual(user(SECRET_PROMPT));
    const receipt = await api(acct.client, 'GET', `/v1/receipts/${same.receipt_id}`);
    expect(verifyMessage(receipt.canonical, receipt.signature)).toBe(env.t.gw.services.signer.address);
    expect(receipt.payload).toMatchObject({ route: 'POST /v1/replay/capsules/:id/replay', cost_micro_usd: same.cost_micro_usd });
    expect(same.cost_micro_usd).toBeGreaterThan(0);

    env.up.switches.reply = 'A different answer entirely.';
    const changed = await api(acct.client, 'POST', `/v1/replay/capsules/${capsule.id}/replay`);
    expect(changed).toMatchObject({ changed: true, baseline_output_sha256: capsule.baseline.output_sha256 });
    expect(changed.output_sha256).not.toBe(capsule.baseline.output_sha256);
    expect(JSON.stringify(changed)).not.toContain('different answer');

    const detail = await api(acct.client, 'GET', `/v1/replay/capsules/${capsule.id}`);
    expect(detail).toMatchObject({ replay_count: 2, changed_count: 1, last_replayed_at: expect.any(String) });
    expect(detail.replays.map((x: any) => x.changed)).toEqual([true, false]);
    expect(JSON.stringify(detail)).not.toContain('different answer');
  });

  it('replays an engine build capsule through the build, under another key when named', async () => {
    const b = await api(acct.client, 'POST', '/v1/engine/builds', { slug: 'replayed', model: 'test-chat', system_prompt: 'Be brief.' });
    await api(acct.client, 'POST', `/v1/engine/builds/${b.id}/publish`);
    const c = await api(acct.client, 'POST', '/v1/replay/capsules', { confirm_seal: true, key_id: keyId, request: { model: 'engine/replayed', messages: user('hi') } });
    expect(c.model).toBe('engine/replayed');
    const other = (await api<{ id: string }>(acct.client, 'POST', '/v1/keys', { scopes: ['inference'] })).id;
    const r = await api(acct.client, 'POST', `/v1/replay/capsules/${c.id}/replay`, { key_id: other });
    expect(r).toMatchObject({ changed: false, key_id: other });
    expect(env.up.requests.map((x) => x.body.messages[0])).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'system', content: 'Be brief.' }]);
    expect(await storedReceipt(env.t, r.receipt_id)).toMatchObject({ engine: { build_id: b.id } });
  });

  it('delete destroys the sealed request and keeps the row; a deleted capsule is never replayed (410)', async () => {
    const runs = await count('replay_runs');
    const del = await api(acct.client, 'DELETE', `/v1/replay/capsules/${capsule.id}`);
    expect(del).toMatchObject({ request_destroyed: true, deleted_at: expect.any(String), replay_count: 2, baseline: capsule.baseline });
    expect(await api(acct.client, 'DELETE', `/v1/replay/capsules/${capsule.id}`)).toMatchObject({ request_destroyed: true }); // idempotent
    const gone = await expectApiError(api(acct.client, 'POST', `/v1/replay/capsules/${capsule.id}/replay`), 410, 'gone');
    expect(gone.message).toContain('deleted');
    expect(await count('replay_runs')).toBe(runs);
    expect(env.up.requests).toEqual([]);
    expect((await api(acct.client, 'GET', `/v1/replay/capsules/${capsule.id}`)).replays).toHaveLength(2);
  });

  it('refuses bad input with a 4xx naming the field, writing nothing and calling nothing', async () => {
    const before = await count('replay_capsules');
    const request = { model: 'test-chat', messages: user('x') };
    const bad = async (body: Record<string, unknown>, param: string) => {
      const r = await call(acct.client, 'POST', '/v1/replay/capsules', body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(JSON.stringify(r.body.error)).toContain(param);
    };
    await bad({ key_id: keyId, request }, 'confirm_seal');
    await bad({ confirm_seal: false, key_id: keyId, request }, 'confirm_seal');
    await bad({ confirm_seal: 'yes', key_id: keyId, request }, 'confirm_seal');
    await bad({ confirm_seal: true, key_id: 'key_nope', request }, 'key_id');
    await bad({ confirm_seal: true, key_id: keyId, request: { ...request, stream: true } }, 'request.stream');
    await bad({ confirm_seal: true, key_id: keyId, request: { model: 'test-chat' } }, 'messages');
    await bad({ confirm_seal: true, key_id: keyId }, 'request');
    expect(await count('replay_capsules')).toBe(before);
    expect(env.up.requests).toEqual([]);
    // An unknown model fails the recording run: nothing recorded.
    await expectApiError(api(acct.client, 'POST', '/v1/replay/capsules', { confirm_seal: true, key_id: keyId, request: { model: 'no-such-model', messages: user('x') } }), 404, 'not_found');
    expect(await count('replay_capsules')).toBe(before);
    // Another account's capsule does not exist for it.
    const other = await fundedKey(env.t, 1_000_000);
    await expectApiError(api(other.client, 'GET', `/v1/replay/capsules/${capsule.id}`), 404, 'not_found');
    await expectApiError(api(other.client, 'POST', `/v1/replay/capsules/${capsule.id}/replay`), 404, 'not_found');
    await expectApiError(api(other.client, 'DELETE', `/v1/replay/capsules/${capsule.id}`), 404, 'not_found');
  });
});
