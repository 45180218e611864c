import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { privateKeyToAccount } from 'viem/accounts';
import { sha256Hex } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { ADMIN_TOKEN, METRICS_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';
import { GATEWAY_ARGS } from './support/built.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { tool } from './support/needs.ts';

let t: TestGateway;
let admin: SvcClient;
beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_BODY_LIMIT_BYTES: '4096', SVC_HEALTH_SAMPLE_SECONDS: '60' } });
  admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
});
afterAll(async () => t?.close());

describe('platform routes', () => {
  it('banner, healthz and attestation', async () => {
    expect(await t.client.banner()).toMatchObject({ name: 'svc gateway', version: expect.any(String) });
    const h = await fetch(`${t.url}/healthz`);
    expect(await h.text()).toBe('ok');
    expect(h.headers.get('x-request-id')).toMatch(/^req_/);
    const a = await t.client.request<{ verified: boolean; error: string }>('GET', '/v1/attestation');
    expect(a.verified).toBe(false);
    expect(a.error).toMatch(/no TEE/);
  });

  it('status reports recorded uptime from samples the leader writes', async () => {
    const health = t.gw.services.health;
    const start = t.clock.now().getTime();
    // 10 intervals: healthy samples in 8 of them, nothing recorded in 2 (the gateway was down).
    for (let i = 0; i < 10; i++) {
      t.clock.set(start + i * 60_000);
      if (i !== 3 && i !== 4) expect(await t.gw.leader.runAllOnce()).toBe(true);
    }
    const s = (await t.client.status()) as { status: string; uptime: Record<string, { samples_expected: number; samples_healthy: number; uptime_ratio: number }> };
    expect(s.status).toBe('ok');
    expect(s.uptime['24h']).toMatchObject({ samples_expected: 10, samples_healthy: 8, uptime_ratio: 0.8 });
    expect((await health.uptime(3600)).uptime_ratio).toBe(0.8);
  });

  it('serves Prometheus text with the sable_leader gauge, to the metrics token only', async () => {
    const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    const text = await res.text();
    expect(text).toMatch(/^sable_leader 1$/m);
    expect(text).toMatch(/svc_http_requests_total\{method="GET",route="\/healthz",status="2xx"\} \d+/);
    expect(text).not.toMatch(/acct_|(?<![a-z_])key_[a-z0-9]{10}|sk-svc_/);
    const wrong = await fetch(`${t.url}/metrics`, { headers: { authorization: 'Bearer not-the-token-0000000' } });
    expect(wrong.status).toBe(401);
  });

  // .ci/run installs promtool; elsewhere this one check is skipped without it (named at the end of the run).
  it.skipIf(!tool('promtool', 'apt-get install prometheus (.ci/run installs it)', 'the promtool check of /metrics'))('serves /metrics text that promtool accepts', async () => {
    const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const out = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(out.stderr + out.stdout).toBe('');
    expect(out.status).toBe(0);
  });

  it('admin metrics', async () => {
    const m = await admin.request<Record<string, unknown>>('GET', '/v1/admin/metrics');
    expect(m).toMatchObject({ accounts: expect.any(Number), suspended_accounts: expect.any(Number), billing_enforced: false, paying_accounts: 0 });
    expect(m.spend_by_window).toMatchObject({ '24h': { events: 0, cost_micro_usd: 0 } });
  });
});

describe('request bodies', () => {
  it('answers 413 over the body limit and writes nothing', async () => {
    const s = await t.signIn();
    const res = await s.client.raw('POST', '/v1/keys', { body: { name: 'x'.repeat(5000) } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('payload_too_large');
    expect(await s.client.listKeys()).toEqual([]);
  });

  it('refuses a non-JSON body on a JSON route with 415', async () => {
    const s = await t.signIn();
    const res = await s.client.raw('POST', '/v1/keys', { body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(415);
  });

  it('refuses a denylisted payload by its sha256 on every route that takes a body, storing no content', async () => {
    const s = await t.signIn();
    const payload = JSON.stringify({ name: 'reported content' });
    const digest = sha256Hex(payload);
    const added = await admin.request<{ sha256: string; created: boolean }>('POST', '/v1/admin/denylist', { body: { sha256: digest, reason: 'report #12' } });
    expect(added).toMatchObject({ sha256: digest, created: true });
    expect((await admin.request<{ created: boolean }>('POST', '/v1/admin/denylist', { body: { sha256: digest } })).created).toBe(false);
    const refused = await s.client.raw('POST', '/v1/keys', { body: payload, headers: { 'content-type': 'application/json' } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe('payload_denied');
    const onPublic = await t.client.raw('POST', '/v1/auth/verify', { body: payload, headers: { 'content-type': 'application/json' } });
    expect(onPublic.status).toBe(403);
    expect(await s.client.listKeys()).toEqual([]);
    // A different payload passes.
    await s.client.createKey({ name: 'fine content' });
    const rows = await t.gw.database.db.selectFrom('denylist').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain('reported content');
    await expectApiError(admin.request('POST', '/v1/admin/denylist', { body: { sha256: 'abc' } }), 400, 'invalid_request');
  });
});

describe('denylist on raw bodies', () => {
  it('refuses a denylisted multipart upload (POST /v1/files) by the sha256 of its bytes and stores nothing', async () => {
    const s = await t.signIn();
    const key = (await s.client.createKey({ scopes: ['files'] })).key;
    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'test-chat', messages: [{ role: 'user', content: 'reported content' }] } });
    const upload = (boundary: string) => {
      const body = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n${line}\n\r\n--${boundary}--\r\n`,
      );
      const send = () => fetch(`${t.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
      return { body, send };
    };
    const files = async () => (await t.gw.database.db.selectFrom('files').select(['id', 'filename']).where('account_id', '=', s.accountId).execute()).length;

    const denied = upload('denied0boundary');
    await admin.request('POST', '/v1/admin/denylist', { body: { sha256: createHash('sha256').update(denied.body).digest('hex'), reason: 'report #13' } });
    const res = await denied.send();
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('payload_denied');
    expect(await files()).toBe(0);
    // Its content was stored as it arrived, before the whole body's digest was known: gone with the refusal.
    expect(await t.gw.database.db.selectFrom('file_chunks').select('owner_id').execute()).toEqual([]);
    expect(await t.gw.database.db.selectFrom('file_uploads').select('file_id').execute()).toEqual([]);
    // The same file in other framing is other bytes: it is stored.
    const other = await upload('other0boundary').send();
    expect(other.status).toBe(200);
    expect(await files()).toBe(1);
  });
});

describe('keys kept in the data directory', () => {
  it('writes the signer and seal keys once with mode 0600; a restart on the same data dir signs and unseals with them', async () => {
    const a = await startTestGateway({ persistent: true });
    let b: TestGateway | undefined;
    try {
      const read = () => Object.fromEntries(['signer.key', 'seal.key'].map((f) => [f, readFileSync(join(a.dataDir, f), 'utf8')]));
      for (const f of ['signer.key', 'seal.key']) expect(statSync(join(a.dataDir, f)).mode & 0o777, f).toBe(0o600);
      const keys = read();
      const signer = async (g: TestGateway) => ((await (await fetch(`${g.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
      const address = await signer(a);
      expect(address).toBe(privateKeyToAccount(keys['signer.key']!.trim() as `0x${string}`).address);
      // Something sealed at rest by the first process (a file's content) ...
      const s = await a.signIn();
      const key = (await s.client.createKey({ scopes: ['files'] })).key;
      const content = `${JSON.stringify({ custom_id: 'k', method: 'POST', url: '/v1/embeddings', body: { model: 'm', input: 'x' } })}\n`;
      const form = new FormData();
      form.set('purpose', 'batch');
      form.set('file', new Blob([content]), 'in.jsonl');
      const up = await fetch(`${a.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
      expect(up.status).toBe(200);
      const fileId = ((await up.json()) as { id: string }).id;
      await a.stop();

      b = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir } });
      expect(await signer(b)).toBe(address);
      expect(read()).toEqual(keys);
      // ... is read back by the restarted one.
      const back = await fetch(`${b.url}/v1/files/${fileId}/content`, { headers: { authorization: `Bearer ${key}` } });
      expect(back.status).toBe(200);
      expect(await back.text()).toBe(content);
    } finally {
      await b?.stop();
      await a.close();
    }
  });
});

/** The value of the sable_leader gauge in a gateway's /metrics. */
async function leaderGauge(url: string): Promise<string | undefined> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return /^sable_leader (\S+)$/m.exec(text)?.[1];
}

describe('leader election', () => {
  it('one process leads; another takes over when it stops', async () => {
    if (TEST_DB_KIND === 'pglite') {
      // The embedded database serves one process, which always leads.
      expect(t.gw.leader.isLeader).toBe(true);
      return;
    }
    const a = await startTestGateway();
    const b = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir } });
    try {
      expect(a.gw.leader.isLeader).toBe(true);
      expect(b.gw.leader.isLeader).toBe(false);
      // Each process reports its own role.
      expect(await leaderGauge(a.url)).toBe('1');
      expect(await leaderGauge(b.url)).toBe('0');
      expect(await b.gw.leader.runAllOnce()).toBe(false);
      expect(await b.gw.leader.electOnce()).toBe(false); // the lock is still held
      expect(await leaderGauge(b.url)).toBe('0');
      await a.stop();
      expect(await b.gw.leader.electOnce()).toBe(true);
      expect(await leaderGauge(b.url)).toBe('1');
    } finally {
      await b.stop();
      await a.close();
    }
  });
});

describe('boot', () => {
  it('a bad configuration value stops boot with a message naming the variable', () => {
    const r = spawnSync(process.execPath, GATEWAY_ARGS, {
      env: { PATH: process.env.PATH, PORT: 'not-a-port', SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-boot-')) },
      encoding: 'utf8',
    });
    expect(r.status).toBe(78);
    expect(r.stderr).toMatch(/PORT/);
    void execFileSync;
  });
});
