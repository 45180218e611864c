import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * Sandboxes end to end: a real control plane, a real svc-node agent and a real Docker engine, with the
 * small busybox image for speed (test/sandboxes-python.test.ts runs Python in the real image).
 */
const enabled = sandboxImage();
const PRICE = 1000; // micro-USD per second

let t: TestGateway;
let agent: TestAgent;
let api: SvcClient;
let accountId: string;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE), SVC_TERMINAL_ENABLED: 'true', SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const owner = await t.signIn();
  accountId = owner.accountId;
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'sandbox-tests');
  const key = await owner.client.createKey({ scopes: ['sandboxes'] });
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until(
    'sandbox agent connected and heartbeating',
    async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null,
    60_000,
  );
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
});

type Run = { id: string; status: string; exit_code: number | null; stdout: string; stderr: string; timed_out: boolean; oom_killed: boolean; cost_micro_usd: number; duration_ms: number; image_digest: string; replayed?: boolean; receipt: { payload: Record<string, unknown> } };
const run = (body: Record<string, unknown>, headers: Record<string, string> = {}) => api.request<Run>('POST', '/v1/sandboxes', { body, headers });

async function sse(res: Response): Promise<Array<{ event: string; data: any }>> {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((f) => {
      const ev = /^event: (.*)$/m.exec(f)?.[1];
      const data = /^data: (.*)$/m.exec(f)?.[1];
      return ev && data ? { event: ev, data: JSON.parse(data) } : null;
    })
    .filter((x): x is { event: string; data: any } => x !== null);
}

describe.skipIf(!enabled)('one-shot runs', () => {
  it('runs, returns output, and carries a receipt without output', async () => {
    const res = await api.raw('POST', '/v1/sandboxes', { body: { language: 'sh', code: 'echo hi; echo oops >&2; exit 3' } });
    expect(res.status).toBe(200);
    const r = (await res.json()) as Run;
    expect(r).toMatchObject({ status: 'failed', exit_code: 3, stdout: 'hi\n', stderr: 'oops\n', timed_out: false });
    expect(r.cost_micro_usd).toBe(Math.max(1, Math.ceil((r.duration_ms * PRICE) / 1000)));
    const canonical = Buffer.from(res.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString();
    expect(verifyMessage(canonical, res.headers.get(RECEIPT_HEADERS.signature)!)).toBe(t.gw.services.signer.address);
    const payload = JSON.parse(canonical);
    expect(payload.detail).toMatchObject({ exit_code: 3, image_digest: r.image_digest, language: 'sh', network: false });
    expect(canonical).not.toContain('oops');
    const history = await t.client.withCredential({ kind: 'session', token: (await t.signIn()).token }).request<unknown[]>('GET', '/v1/usage/sandboxes');
    expect(history).toEqual([]); // another account sees nothing
  });

  it('streams stdout over SSE and ends with the result and the receipt', async () => {
    const res = await api.raw('POST', '/v1/sandboxes', { body: { code: 'for i in 1 2 3; do echo line$i; done', stream: true } });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const events = await sse(res);
    expect(events.filter((e) => e.event === 'stdout').map((e) => e.data.data).join('')).toBe('line1\nline2\nline3\n');
    expect(events.at(-2)).toMatchObject({ event: 'result', data: { status: 'succeeded', exit_code: 0 } });
    expect(events.at(-1)?.event).toBe('receipt');
    expect(verifyMessage(events.at(-1)!.data.canonical, events.at(-1)!.data.signature)).toBe(t.gw.services.signer.address);
  });

  it('is idempotent with Idempotency-Key: same body replays without running or billing; another body is refused', async () => {
    const body = { code: 'echo once' };
    const first = await run(body, { 'idempotency-key': 'idem-1' });
    // Recorded before the answer left: a caller retrying the moment it got the answer finds it done, not running.
    expect((await t.gw.database.db.selectFrom('idempotency_keys').select('state').where('key', '=', 'idem-1').executeTakeFirstOrThrow()).state).toBe('done');
    const again = await run(body, { 'idempotency-key': 'idem-1' });
    expect(again.id).toBe(first.id);
    expect(again.replayed).toBe(true);
    expect(again.receipt).toEqual(first.receipt);
    const events = await t.gw.database.db.selectFrom('usage_events').select('id').where('request_id', '=', first.id).execute();
    expect(events).toHaveLength(1);
    await expectApiError(run({ code: 'echo twice' }, { 'idempotency-key': 'idem-1' }), 409, 'idempotency_conflict');
  });

  it('kills a run at its time limit, and refuses a limit above the maximum', async () => {
    // Killed, not waited for: what the program would print after its sleep never comes.
    const r = await run({ code: 'echo started; sleep 30; echo finished', timeout_seconds: 1 });
    expect(r).toMatchObject({ status: 'timed_out', timed_out: true, stdout: 'started\n' });
    await expectApiError(run({ code: 'true', timeout_seconds: 100_000 }), 400, 'invalid_request');
  });

  it('has no network, a read-only root, a pids limit and a memory limit', async () => {
    const net = await run({ code: 'ls /sys/class/net; wget -q -T 2 -O- http://1.1.1.1/ || echo unreachable' });
    expect(net.stdout).toContain('unreachable');
    expect(net.stdout).not.toMatch(/eth0/);
    const ro = await run({ code: 'touch /etc/x 2>/dev/null && echo wrote || echo refused; touch /workspace/ok && echo ws-ok' });
    expect(ro.stdout).toBe('refused\nws-ok\n');
    const who = await run({ code: 'id -u' });
    expect(who.stdout.trim()).not.toBe('0');
    // A fork bomb meets the pids limit (64 here): 100 processes never run at once, and the host carries on.
    const count = (n: number) => `for i in $(seq ${n}); do sleep 3 & done 2>/dev/null; echo procs=$(ls /proc | grep -c '^[0-9]*$')`;
    const procs = (r: Run) => Number(/procs=(\d+)/.exec(r.stdout)?.[1] ?? '0');
    expect(procs(await run({ code: count(10), timeout_seconds: 15 }))).toBeGreaterThanOrEqual(10); // the probe works
    const bomb = await run({ code: count(100), timeout_seconds: 15 });
    expect(procs(bomb)).toBeLessThan(64);
    // `&&`: the OOM kill of sort shows in the output itself, not only in oom_killed, which for a killed child
    // of a program that exits 0 comes from Docker's asynchronous event stream and can arrive after the run ends.
    const mem = await run({ code: 'dd if=/dev/zero bs=1M count=200 2>/dev/null | tr "\\0" a | sort > /dev/null && echo survived', timeout_seconds: 20 });
    expect(mem.oom_killed || !mem.stdout.includes('survived') || mem.exit_code !== 0).toBe(true);
    const h = await run({ code: 'echo host alive' });
    expect(h.stdout).toBe('host alive\n');
  });

  it('refuses network when the deployment does not allow it, and `..` in files', async () => {
    await expectApiError(run({ code: 'true', network: true }), 403, 'forbidden');
    await expectApiError(run({ code: 'true', files: [{ path: '../etc/passwd', content: 'x' }] }), 400, 'invalid_request');
    const r = await run({ code: 'cat /workspace/in.txt', files: [{ path: 'in.txt', content: 'from the caller' }] });
    expect(r.stdout).toBe('from the caller');
  });
});

describe.skipIf(!enabled)('sessions', () => {
  it('create, exec, files, snapshot and restore, delete', async () => {
    const s = await api.request<{ id: string; status: string; node_id: string }>('POST', '/v1/sandboxes/sessions', { body: {}, headers: { 'idempotency-key': 'sess-1' } });
    expect(s.status).toBe('running');
    const again = await api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {}, headers: { 'idempotency-key': 'sess-1' } });
    expect(again.id).toBe(s.id);

    const w = await api.raw('PUT', `/v1/sandboxes/sessions/${s.id}/files/dir/hello.txt`, { body: new TextEncoder().encode('hello file'), headers: { 'content-type': 'application/octet-stream' } });
    expect(w.status).toBe(200);
    const read = await api.raw('GET', `/v1/sandboxes/sessions/${s.id}/files/dir/hello.txt`);
    expect(await read.text()).toBe('hello file');
    const list = await api.request<{ entries: Array<{ name: string; type: string }> }>('GET', `/v1/sandboxes/sessions/${s.id}/files`, { query: { path: 'dir' } });
    expect(list.entries.map((e) => e.name)).toEqual(['hello.txt']);
    const ex = await api.request<Run>('POST', `/v1/sandboxes/sessions/${s.id}/exec`, { body: { code: 'cat /workspace/dir/hello.txt; echo more >> /workspace/dir/hello.txt' } });
    expect(ex.stdout).toBe('hello file');

    const big = await api.raw('PUT', `/v1/sandboxes/sessions/${s.id}/files/big.bin`, { body: new Uint8Array(8 * 1024 * 1024 + 1), headers: { 'content-type': 'application/octet-stream' } });
    expect(big.status).toBe(413);
    const traversal = await api.raw('PUT', `/v1/sandboxes/sessions/${s.id}/files/..%2F..%2Fetc%2Fx`, { body: new Uint8Array(1), headers: { 'content-type': 'application/octet-stream' } });
    expect(traversal.status).toBe(400);

    const snap = await api.request<{ id: string; node_id: string; bytes: number }>('POST', `/v1/sandboxes/sessions/${s.id}/snapshot`);
    expect(snap.node_id).toBe(s.node_id);
    const restored = await api.request<{ id: string; node_id: string }>('POST', '/v1/sandboxes/sessions', { body: { snapshot_id: snap.id } });
    expect(restored.node_id).toBe(snap.node_id);
    const cat = await api.request<Run>('POST', `/v1/sandboxes/sessions/${restored.id}/exec`, { body: { code: 'cat /workspace/dir/hello.txt' } });
    expect(cat.stdout).toBe('hello filemore\n');

    // Another session cannot see this one's files.
    const other = await api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    const peek = await api.request<Run>('POST', `/v1/sandboxes/sessions/${other.id}/exec`, { body: { code: 'ls /workspace; ls / ; cat /workspace/dir/hello.txt 2>&1 || true' } });
    expect(peek.stdout).not.toContain('hello file');

    const view = await api.request<{ exec_count: number; cost_micro_usd: number; alive_seconds: number }>('GET', `/v1/sandboxes/sessions/${s.id}`);
    expect(view.exec_count).toBe(1);
    expect(view.cost_micro_usd).toBe(ex.cost_micro_usd);
    for (const id of [s.id, restored.id, other.id]) {
      expect((await api.request<{ status: string }>('DELETE', `/v1/sandboxes/sessions/${id}`)).status).toBe('stopped');
      expect((await api.request<{ status: string }>('DELETE', `/v1/sandboxes/sessions/${id}`)).status).toBe('stopped');
    }
    await expectApiError(api.request('POST', `/v1/sandboxes/sessions/${s.id}/exec`, { body: { code: 'true' } }), 409, 'conflict');
    expect((await api.request<unknown[]>('GET', '/v1/sandboxes/snapshots')).length).toBe(1);
    await api.request('DELETE', `/v1/sandboxes/snapshots/${snap.id}`);
    await expectApiError(api.request('GET', `/v1/sandboxes/snapshots/${snap.id}`), 404, 'not_found');
  }, 120_000);

  it('lists the workspace root with no path, ".", "/workspace" or "/workspace/"; a path outside is 400', async () => {
    const s = await api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    await api.raw('PUT', `/v1/sandboxes/sessions/${s.id}/files/top.txt`, { body: new TextEncoder().encode('x'), headers: { 'content-type': 'application/octet-stream' } });
    await api.raw('PUT', `/v1/sandboxes/sessions/${s.id}/files/sub/in.txt`, { body: new TextEncoder().encode('y'), headers: { 'content-type': 'application/octet-stream' } });
    type Listing = { path: string; entries: Array<{ name: string; type: string }> };
    const root = await api.request<Listing>('GET', `/v1/sandboxes/sessions/${s.id}/files`);
    expect(root.path).toBe('/workspace');
    expect(root.entries.map((e) => [e.name, e.type])).toEqual([
      ['sub', 'dir'],
      ['top.txt', 'file'],
    ]);
    for (const path of ['', '.', './', '/workspace', '/workspace/']) {
      expect(await api.request<Listing>('GET', `/v1/sandboxes/sessions/${s.id}/files`, { query: { path } }), JSON.stringify(path)).toEqual(root);
    }
    await expectApiError(api.request('GET', `/v1/sandboxes/sessions/${s.id}/files`, { query: { path: '/etc' } }), 400, 'invalid_request');
    await expectApiError(api.request('GET', `/v1/sandboxes/sessions/${s.id}/files`, { query: { path: '../x' } }), 400, 'invalid_request');
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  });
});

describe.skipIf(!enabled)('metering and the terminal', () => {
  it('records run history (metadata only) and usage events of kind sandbox', async () => {
    const events = await t.gw.database.db.selectFrom('usage_events').selectAll().where('account_id', '=', accountId).where('kind', '=', 'sandbox').execute();
    expect(events.length).toBeGreaterThan(5);
    const runs = await t.gw.database.db.selectFrom('sandbox_runs').selectAll().where('account_id', '=', accountId).execute();
    expect(JSON.stringify(runs)).not.toMatch(/hello file|line1/);
  });

  it('the keyless terminal runs where its flag is on, and answers 404 with an empty body where off', async () => {
    const res = await fetch(`${t.url}/v1/terminal/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'echo keyless' }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Run).stdout).toBe('keyless\n');
    const off = await startTestGateway();
    try {
      const r = await fetch(`${off.url}/v1/terminal/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'echo x' }) });
      expect(r.status).toBe(404);
      expect(await r.text()).toBe('');
    } finally {
      await off.close();
    }
  });
});
