import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress } from 'viem';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { jcs, notarize, notaryAccount, sha, type Notarized, type Signed } from './support/notary.ts';

/** Signed reports over recorded data: audit packs of a run, and the SLA report from health samples. */
const PRICE = 1_000;
let t: TestGateway;
let A: Awaited<ReturnType<typeof notaryAccount>>;
let run1: Notarized[];
let signer: string;

beforeAll(async () => {
  t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_NOTARY_PRICE_MICRO_USD: String(PRICE), SVC_HEALTH_SAMPLE_SECONDS: '60' } });
  A = await notaryAccount(t);
  run1 = [];
  for (let i = 0; i < 4; i++) {
    run1.push(await notarize(A.api, 'run-1'));
    t.clock.advance(1_000);
  }
  signer = t.gw.services.signer.address;
});
afterAll(async () => t?.close());

describe('audit packs', () => {
  type Audit = Signed<'audit', Record<string, any>>;
  const audit = (framework?: string) => A.client.request<Audit>('POST', '/v1/runs/run-1/audit', { query: { framework } });

  it('are signed, content-free, and map evidence per framework with a disclaimer', async () => {
    const plain = await audit();
    expect(plain.audit.framework).toBeNull();
    expect(plain.audit).not.toHaveProperty('evidence_mapping');
    expect(plain.audit).not.toHaveProperty('disclaimer');

    for (const [fw, control] of [
      ['eu_ai_act', 'Art. 12(1)'],
      ['soc2', 'CC7.2'],
    ] as const) {
      const a = await audit(fw);
      expect(jcs(a.audit)).toBe(a.canonical);
      expect(await recoverMessageAddress({ message: a.canonical, signature: a.signature })).toBe(signer);
      expect(a.audit.framework).toBe(fw);
      expect(a.audit.disclaimer).toMatch(/evidence mapping, not a certification/);
      expect(a.audit.disclaimer).toMatch(/attestation of compliance/);
      const item = (a.audit.evidence_mapping as Array<{ control: string; status: string; evidence: string[] }>).find((m) => m.control === control);
      expect(item?.status).toBe('evidence_present');
      expect(a.audit.integrity).toMatchObject({ chain_valid: true, receipts_checked: 4, failures: [], signer });
      expect(a.audit.run).toMatchObject({ id: 'run-1', account_id: A.accountId, receipt_count: 4, total_cost_micro_usd: 4 * PRICE });
      expect(a.audit.totals_by_kind).toEqual([{ kind: 'notary', receipts: 4, cost_micro_usd: 4 * PRICE }]);
      expect(a.audit.receipts).toHaveLength(4);
      for (const [i, r] of (a.audit.receipts as Array<Record<string, unknown>>).entries()) {
        expect(Object.keys(r).sort()).toEqual(['cost_micro_usd', 'created_at', 'hash', 'id', 'key_id', 'kind', 'model', 'prev_hash', 'route', 'seq']);
        expect(r).toMatchObject({ id: run1[i]!.id, seq: i + 1, kind: 'notary', route: 'POST /v1/notary/receipts', cost_micro_usd: PRICE, hash: sha(run1[i]!.canonical) });
      }
      // No content and no content fingerprints anywhere in the pack.
      for (const r of run1) {
        expect(a.canonical).not.toContain(r.payload.detail.input_sha256);
        expect(a.canonical).not.toContain(r.payload.detail.output_sha256);
      }
      expect(a.canonical).not.toMatch(/private label text|"detail"|"label"|input_sha256/);
    }
  });

  it('an unknown framework is 400 naming framework', async () => {
    const e = await expectApiError(audit('iso42001'), 400, 'invalid_request');
    expect(e.param).toBe('framework');
  });
});

describe('SLA report', () => {
  type Sla = Signed<'report', Record<string, any>>;

  it('is signed and computed from recorded health samples', async () => {
    // 58 s into a minute: the expected count must not depend on where the first sample falls in its interval.
    const start = Math.ceil((t.clock.now().getTime() + 3_600_000) / 60_000) * 60_000 + 58_000;
    // 10 intervals: healthy samples in 8, none recorded in 2 (the gateway was down).
    for (let i = 0; i < 10; i++) {
      t.clock.set(start + i * 60_000);
      if (i !== 3 && i !== 4) expect(await t.gw.leader.runAllOnce()).toBe(true);
    }
    t.clock.set(start + 9 * 60_000 + 5_000);
    const from = new Date(start - 1_000).toISOString();
    const to = new Date(start + 9 * 60_000 + 1_000).toISOString();
    const s = await A.client.request<Sla>('POST', '/v1/reports/sla', { body: { from, to } });
    expect(s.report).toMatchObject({
      type: 'svc.sla_report',
      account_id: A.accountId,
      window: { from, to, seconds: 9 * 60 + 2, clamped_to_now: false },
      sample_interval_seconds: 60,
      samples_expected: 10,
      samples_healthy: 8,
      uptime_ratio: 0.8,
      current: { status: 'ok', database_ok: true, last_sample_at: new Date(start + 9 * 60_000).toISOString(), last_sample_ok: true },
      generated_at: t.clock.now().toISOString(),
    });
    expect(jcs(s.report)).toBe(s.canonical);
    expect(await recoverMessageAddress({ message: s.canonical, signature: s.signature })).toBe(signer);

    // A `to` in the future is clamped to now.
    const later = await A.client.request<Sla>('POST', '/v1/reports/sla', { body: { from, to: new Date(start + 86_400_000).toISOString() } });
    expect(later.report.window).toEqual({ from, to: t.clock.now().toISOString(), seconds: 9 * 60 + 6, clamped_to_now: true });
    expect(later.report).toMatchObject({ samples_expected: 10, samples_healthy: 8 });

    // No body: the last 30 days up to now.
    const d = await A.client.request<Sla>('POST', '/v1/reports/sla');
    expect(d.report.window).toMatchObject({ to: t.clock.now().toISOString(), seconds: 30 * 86_400 });
    expect(d.report.samples_healthy).toBe(8);
  });

  it('refuses to-before-from, an over-long span and unknown fields with 400 naming the field', async () => {
    const sla = (body: unknown) => A.client.request('POST', '/v1/reports/sla', { body });
    const e1 = await expectApiError(sla({ from: '2026-02-02T00:00:00Z', to: '2026-02-01T00:00:00Z' }), 400, 'invalid_request');
    expect(e1.param).toBe('to');
    const e2 = await expectApiError(sla({ from: '2024-01-01T00:00:00Z', to: '2025-06-01T00:00:00Z' }), 400, 'invalid_request');
    expect(e2.param).toBe('from');
    const e3 = await expectApiError(sla({ from: 'yesterday' }), 400, 'invalid_request');
    expect(e3.param).toBe('from');
  });
});
