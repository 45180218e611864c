import { evidenceMapping, type Framework } from './frameworks.ts';
import { parsePayload } from './integrity.ts';
import { chainOf } from './proof.ts';
import { runSummary, spanSeconds, type RunReceiptRow, type RunRow } from './runs.ts';

const str = (v: unknown) => (typeof v === 'string' ? v : null);
const int = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) ? v : null);

export const CONTENT_POLICY =
  'Metadata only: receipt ids, sequence, kind, route, model, key id, cost, time and hashes. No prompts, outputs, inputs, labels or content fingerprints are included.';

/**
 * The content-free audit pack of a run (signed by the caller). Per-receipt fields are picked one by one
 * from the signed payload, so nothing a payload's `detail` carries can reach the pack.
 */
export function auditDocument(run: RunRow, receipts: RunReceiptRow[], signer: string, framework: Framework | null, now: Date) {
  const chain = chainOf(run, receipts, signer);
  const rows = receipts.map((r) => {
    const p = parsePayload(r.payload);
    return {
      id: r.id,
      seq: r.run_seq,
      kind: r.kind,
      route: str(p?.route),
      model: str(p?.model),
      key_id: str(p?.key_id),
      cost_micro_usd: int(p?.cost_micro_usd),
      created_at: r.created_at.toISOString(),
      hash: r.hash,
      prev_hash: r.prev_hash,
    };
  });
  const byKind = new Map<string, { kind: string; receipts: number; cost_micro_usd: number }>();
  for (const r of rows) {
    const t = byKind.get(r.kind) ?? { kind: r.kind, receipts: 0, cost_micro_usd: 0 };
    t.receipts += 1;
    t.cost_micro_usd += r.cost_micro_usd ?? 0;
    byKind.set(r.kind, t);
  }
  const totals = [...byKind.values()].sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0));
  const summary = runSummary(run);
  const mapping = framework
    ? evidenceMapping(framework, {
        receipts: rows.length,
        chainValid: chain.chain_valid,
        kinds: totals.map((t) => t.kind),
        models: [...new Set(rows.map((r) => r.model).filter((m): m is string => m !== null))].sort(),
        keys: new Set(rows.map((r) => r.key_id).filter((k) => k !== null)).size,
        firstAt: summary.first_at,
        lastAt: summary.last_at,
      })
    : {};
  return {
    type: 'svc.audit_pack' as const,
    version: 1 as const,
    content_policy: CONTENT_POLICY,
    run: { ...summary, account_id: run.account_id, span_seconds: spanSeconds(run) },
    receipts: rows,
    integrity: { chain_valid: chain.chain_valid, receipts_checked: chain.checked, failures: chain.failures, signer },
    totals_by_kind: totals,
    framework,
    ...mapping,
    generated_at: now.toISOString(),
  };
}
