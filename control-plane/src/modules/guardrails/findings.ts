import type { ReceiptGuardrails } from '@svc/shared';

/** One finding of one receipt, as GET /v1/guardrails/findings lists it. */
export interface FindingEvent {
  receipt_id: string;
  created_at: string;
  route: string;
  model: string | null;
  key_id: string | null;
  policy_id: string | null;
  rule: string;
  direction: 'input' | 'output';
  category: string;
  count: number;
  severity: string;
  action: string;
  decision: string;
}

interface Payload {
  id?: unknown;
  created_at?: unknown;
  route?: unknown;
  model?: unknown;
  key_id?: unknown;
  policy?: { id?: unknown } | null;
  guardrails?: ReceiptGuardrails;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/**
 * Findings decoded from signed receipt payloads (newest first): each receipt's `guardrails.findings`, which carry
 * rule, direction, category, count, severity, action and decision, never matched text. A receipt that cannot
 * be read is skipped.
 */
export function decodeFindings(receipts: ReadonlyArray<{ id: string; payload: string; created_at: Date }>) {
  const events: FindingEvent[] = [];
  let blocked = 0;
  for (const r of receipts) {
    let p: Payload;
    try {
      p = JSON.parse(r.payload) as Payload;
    } catch {
      continue;
    }
    const fs = p.guardrails?.findings;
    if (!Array.isArray(fs) || fs.length === 0) continue;
    if (fs.some((f) => f.decision === 'blocked')) blocked++;
    for (const f of fs) {
      events.push({
        receipt_id: r.id,
        created_at: str(p.created_at) ?? r.created_at.toISOString(),
        route: str(p.route) ?? '',
        model: str(p.model),
        key_id: str(p.key_id),
        policy_id: str(p.policy?.id),
        rule: String(f.rule),
        direction: f.direction === 'output' ? 'output' : 'input',
        category: String(f.category),
        count: Number(f.count) || 0,
        severity: String(f.severity),
        action: String(f.action),
        decision: String(f.decision),
      });
    }
  }
  const tally = (key: (e: FindingEvent) => string) => {
    const out: Record<string, number> = {};
    for (const e of events) out[key(e)] = (out[key(e)] ?? 0) + e.count;
    return out;
  };
  return {
    events,
    blocked,
    totals: {
      events: events.length,
      matches: events.reduce((s, e) => s + e.count, 0),
      by_category: tally((e) => e.category),
      by_decision: tally((e) => e.decision),
      by_direction: tally((e) => e.direction),
    },
  };
}
