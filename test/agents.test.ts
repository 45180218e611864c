import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * Hosted agents without a sandbox node: deploy (validation, the per-account limit under concurrency), list,
 * gate, triggers, hook URLs, mailboxes and delete (the key revoked, the sealed code gone). Runs on a real node
 * and Docker are in agents-runs.test.ts and agents-hooks.test.ts.
 */
let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
beforeAll(async () => {
  t = await startTestGateway();
  owner = await t.signIn();
});
afterAll(async () => t?.close());

type Agent = {
  id: string;
  name: string;
  enabled: boolean;
  schedule: string | null;
  next_run_at: string | null;
  code_sha256: string;
  triggers: { mailbox: boolean; max_runs_per_hour: number; hook: { enabled: boolean; signed: boolean } };
  key: { id: string; status: string; spend_cap_micro_usd: number | null; scopes: string[] };
  run_count: number;
  last_run: unknown;
};
const deploy = (c: SvcClient, body: Record<string, unknown>) => c.request<Agent>('POST', '/v1/agents', { body: { name: 'a', language: 'sh', code: 'echo hi', ...body } });

describe('deploy', () => {
  it('seals the code, mints a bounded key whose secret is never shown, and lists the agent without code', async () => {
    const a = await deploy(owner.client, { name: 'daily', code: 'echo "$SVC_INPUT"', schedule: '0 * * * *', spend_cap_micro_usd: 50_000 });
    expect(a).toMatchObject({ name: 'daily', enabled: true, schedule: '0 * * * *', run_count: 0, last_run: null, triggers: { mailbox: false, max_runs_per_hour: 60, hook: { enabled: false, signed: false } } });
    expect(a.key).toMatchObject({ status: 'active', spend_cap_micro_usd: 50_000 });
    expect(a.key.scopes).not.toContain('billing');
    expect(new Date(a.next_run_at!).getTime()).toBeGreaterThan(t.clock.now().getTime());
    expect(JSON.stringify(a)).not.toMatch(/sk-svc_[\w-]{20}|SVC_INPUT/); // the key's prefix only
    const row = await t.gw.database.db.selectFrom('agents').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.code_sealed).toString('latin1')).not.toContain('SVC_INPUT');
    expect(Buffer.from(row.key_sealed).toString('latin1')).not.toContain('sk-svc_');
    const { agents } = await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents');
    expect(agents.map((x) => x.id)).toContain(a.id);
    expect(JSON.stringify(agents)).not.toMatch(/sk-svc_[\w-]{20}|SVC_INPUT/);
    // The key is the keys module's, marked as the agent's: listed, never rotated.
    const keys = await owner.client.request<Array<{ id: string; managed_by: string | null }>>('GET', '/v1/keys');
    expect(keys.find((k) => k.id === a.key.id)?.managed_by).toBe('agent');
    await expectApiError(owner.client.request('POST', `/v1/keys/${a.key.id}/rotate`, { body: {} }), 409, 'conflict');
    expect(await t.signIn().then((o) => o.client.request<{ agents: Agent[] }>('GET', '/v1/agents'))).toEqual({ agents: [] });
  });

  it('refuses bad input with a 400 naming the field, and writes nothing', async () => {
    const before = await t.gw.database.db.selectFrom('agents').select('id').execute();
    for (const [body, param] of [
      [{ schedule: '*/10 * * * * *' }, 'schedule'], // every 10 s: under the 60 s minimum
      [{ schedule: 'not a cron' }, 'schedule'],
      [{ language: 'cobol' }, 'language'],
      [{ code: '' }, 'code'],
      [{ code: 'echo \0' }, 'code'],
      [{ max_runs_per_hour: 0 }, 'max_runs_per_hour'],
      [{ timeout_seconds: 100_000 }, 'timeout_seconds'],
      [{ parent_key_id: 'key_nope' }, 'parent_key_id'],
      [{ surprise: true }, 'surprise'],
    ] as const) {
      const e = await expectApiError(deploy(owner.client, body), 400, 'invalid_request');
      expect(e.param, JSON.stringify(body)).toBe(param);
    }
    expect((await expectApiError(deploy(owner.client, { code: 'x'.repeat(300 * 1024) }), 413, 'payload_too_large')).param).toBe('code');
    expect(await t.gw.database.db.selectFrom('agents').select('id').execute()).toEqual(before);
  });

  it('mints the key as a delegated child of a named key, bounded by it', async () => {
    const parent = await owner.client.createKey({ scopes: ['sandboxes', 'agents'], spend_cap_micro_usd: 9_000 });
    const a = await deploy(owner.client, { parent_key_id: parent.id, scopes: ['sandboxes'] });
    expect(a.key).toMatchObject({ scopes: ['sandboxes'], spend_cap_micro_usd: 9_000 });
    const keys = await owner.client.request<Array<{ id: string; parent_id: string | null }>>('GET', '/v1/keys');
    expect(keys.find((k) => k.id === a.key.id)?.parent_id).toBe(parent.id);
    const e = await expectApiError(deploy(owner.client, { parent_key_id: parent.id, scopes: ['inference'] }), 403, 'insufficient_scope');
    expect(e.param).toBe('scopes');
  });

  it('holds at most 20 agents per account, also when deploys race', async () => {
    const o = await t.signIn();
    await Promise.all(Array.from({ length: 18 }, (_, i) => deploy(o.client, { name: `n${i}` })));
    const racing = await Promise.allSettled([deploy(o.client, { name: 'x' }), deploy(o.client, { name: 'y' }), deploy(o.client, { name: 'z' })]);
    expect(racing.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    const e = await expectApiError(deploy(o.client, { name: '21st' }), 409, 'conflict');
    expect(e.body?.error).toMatchObject({ reason: 'agent_limit', limit: 20 });
    expect((await o.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents).toHaveLength(20);
  });
});

describe('gate, triggers and hooks', () => {
  it('gates, sets triggers within range, and shows the hook URL once', async () => {
    const a = await deploy(owner.client, { schedule: '*/5 * * * *' });
    const off = await owner.client.request<Agent>('POST', `/v1/agents/${a.id}/gate`, { body: { enabled: false } });
    expect(off).toMatchObject({ enabled: false, next_run_at: null });
    await expectApiError(owner.client.request('POST', `/v1/agents/${a.id}/trigger`, { body: {} }), 409, 'conflict');
    expect((await owner.client.request<Agent>('POST', `/v1/agents/${a.id}/gate`, { body: { enabled: true } })).enabled).toBe(true);
    const set = await owner.client.request<Agent>('POST', `/v1/agents/${a.id}/triggers`, { body: { mailbox: true, max_runs_per_hour: 5 } });
    expect(set.triggers).toMatchObject({ mailbox: true, max_runs_per_hour: 5 });
    for (const body of [{ max_runs_per_hour: 0 }, { max_runs_per_hour: 3601 }, { mailbox: 'yes' }, {}]) {
      await expectApiError(owner.client.request('POST', `/v1/agents/${a.id}/triggers`, { body }), 400, 'invalid_request');
    }
    const hook = await owner.client.request<{ url: string }>('POST', `/v1/agents/${a.id}/hooks/rotate`);
    expect(hook.url).toMatch(new RegExp(`^${t.url}/v1/agents/${a.id}/hooks/ahk_`));
    const token = hook.url.split('/').at(-1)!;
    const row = await t.gw.database.db.selectFrom('agents').select('hook_token_hash').where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(row.hook_token_hash).not.toContain(token);
    const listed = (await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents.find((x) => x.id === a.id)!;
    expect(listed.triggers.hook).toMatchObject({ enabled: true, signed: false });
    expect(JSON.stringify(listed)).not.toContain(token);
    const secret = await owner.client.request<{ signed: boolean }>('POST', `/v1/agents/${a.id}/hooks/secret`, { body: { secret: 'a-long-enough-secret' } });
    expect(secret).toEqual({ agent_id: a.id, object: 'agent.hook_secret', signed: true });
    await expectApiError(owner.client.request('POST', `/v1/agents/${a.id}/hooks/secret`, { body: { secret: 'short' } }), 400, 'invalid_request');
    expect((await owner.client.request<{ signed: boolean }>('POST', `/v1/agents/${a.id}/hooks/secret`, { body: { secret: null } })).signed).toBe(false);
    // Rotating kills the previous URL at once; disabling drops the new one.
    const again = await owner.client.request<{ url: string }>('POST', `/v1/agents/${a.id}/hooks/rotate`);
    expect((await fetch(hook.url, { method: 'POST', body: 'x' })).status).toBe(404);
    await owner.client.request('POST', `/v1/agents/${a.id}/hooks/disable`);
    expect((await fetch(again.url, { method: 'POST', body: 'x' })).status).toBe(404);
    // Another account's agent is not found.
    const other = await t.signIn();
    await expectApiError(other.client.request('POST', `/v1/agents/${a.id}/hooks/rotate`), 404, 'not_found');
  });
});

describe('mailboxes', () => {
  it('delivers sealed messages between the account\'s agents and reads them, consuming when asked', async () => {
    const to = await deploy(owner.client, { name: 'to' });
    const from = await deploy(owner.client, { name: 'from' });
    const key = await owner.client.createKey({ scopes: ['agents'] });
    const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
    const sent = await api.request<{ id: string; run_id: string | null }>('POST', `/v1/agents/${to.id}/messages`, { body: { content: 'hello there', from_agent_id: from.id } });
    expect(sent).toMatchObject({ agent_id: to.id, from_agent_id: from.id, bytes: 11, run_id: null });
    await api.request('POST', `/v1/agents/${to.id}/messages`, { body: { body: 'second' } });
    const row = await t.gw.database.db.selectFrom('agent_messages').select('content_sealed').where('id', '=', sent.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.content_sealed).toString('latin1')).not.toContain('hello');
    type Box = { messages: Array<{ content: string; read_at: string | null }>; unread: number };
    const peek = await api.request<Box>('GET', `/v1/agents/${to.id}/messages`);
    expect(peek.messages.map((m) => m.content)).toEqual(['hello there', 'second']);
    expect(peek.unread).toBe(2);
    const taken = await api.request<Box>('GET', `/v1/agents/${to.id}/messages?consume=true&unread_only=true`);
    expect(taken.messages).toHaveLength(2);
    expect(taken.unread).toBe(0);
    expect((await api.request<Box>('GET', `/v1/agents/${to.id}/messages?unread_only=true`)).messages).toEqual([]);
    // Another account's agent: 404, as an unknown one; a sender of another account: 400 naming it.
    const other = await t.signIn();
    const theirs = await deploy(other.client, {});
    await expectApiError(api.request('POST', `/v1/agents/${theirs.id}/messages`, { body: { content: 'x' } }), 404, 'not_found');
    await expectApiError(api.request('GET', `/v1/agents/${theirs.id}/messages`), 404, 'not_found');
    const e = await expectApiError(api.request('POST', `/v1/agents/${to.id}/messages`, { body: { content: 'x', from_agent_id: theirs.id } }), 400, 'invalid_request');
    expect(e.param).toBe('from_agent_id');
    expect((await expectApiError(api.request('POST', `/v1/agents/${to.id}/messages`, { body: { content: 'x'.repeat(40_000) } }), 413, 'payload_too_large')).param).toBe('content');
    await expectApiError(api.request('POST', `/v1/agents/${to.id}/messages`, { body: {} }), 400, 'invalid_request');
  });
});

describe('delete', () => {
  it('revokes the agent key and its subtree and deletes the sealed code', async () => {
    const a = await deploy(owner.client, { scopes: ['agents', 'keys:delegate'] });
    // The agent key's secret is injected into runs only; read it here as a run would get it, to use it.
    const { sealer, secret } = await agentSecret(a.id);
    const agentApi = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: secret } });
    const child = await agentApi.request<{ key: string }>('POST', '/v1/keys/delegate', { body: { scopes: ['agents'] } });
    expect(sealer).toBeDefined();
    await agentApi.request('GET', `/v1/agents/${a.id}/messages`);
    const gone = await owner.client.request<{ deleted: boolean; revoked_ids: string[] }>('DELETE', `/v1/agents/${a.id}`);
    expect(gone.deleted).toBe(true);
    expect(gone.revoked_ids).toHaveLength(2);
    await expectApiError(agentApi.request('GET', `/v1/agents/${a.id}/messages`), 401, 'invalid_credential');
    await expectApiError(new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: child.key } }).request('GET', `/v1/agents/${a.id}/messages`), 401, 'invalid_credential');
    expect(await t.gw.database.db.selectFrom('agents').select('id').where('id', '=', a.id).executeTakeFirst()).toBeUndefined();
    await expectApiError(owner.client.request('DELETE', `/v1/agents/${a.id}`), 404, 'not_found');
    expect((await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents.map((x) => x.id)).not.toContain(a.id);
  });
});

async function agentSecret(id: string) {
  const { Sealer } = await import('@svc/shared');
  const sealer = new Sealer(t.gw.sealKey);
  const row = await t.gw.database.db.selectFrom('agents').select('key_sealed').where('id', '=', id).executeTakeFirstOrThrow();
  return { sealer, secret: sealer.open(row.key_sealed, `agents.key:${id}`).toString('utf8') };
}
