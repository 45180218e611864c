import type { Selectable } from 'kysely';
import type { UsageEventsTable } from '../../db/schema.ts';

export type UsageRow = Selectable<UsageEventsTable>;

/** The public shape of a metering event: metadata only. `seq` orders events and resumes streams. */
export function usageView(e: UsageRow) {
  return {
    id: e.id,
    object: 'usage_event' as const,
    seq: e.n,
    request_id: e.request_id,
    receipt_id: e.receipt_id,
    kind: e.kind,
    route: e.route,
    model: e.model,
    key_id: e.key_id,
    run_id: e.run_id,
    units: e.units as Record<string, number | string>,
    cost_micro_usd: e.cost_micro_usd,
    created_at: e.created_at.toISOString(),
  };
}

export type UsageEventView = ReturnType<typeof usageView>;

const CSV_COLUMNS = ['id', 'created_at', 'kind', 'route', 'model', 'key_id', 'run_id', 'request_id', 'receipt_id', 'cost_micro_usd', 'units'] as const;

function csvCell(v: unknown): string {
  const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  // Quote always-safe; neutralise spreadsheet formulas.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return `"${safe.replace(/"/g, '""')}"`;
}

export function usageCsv(events: UsageEventView[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const e of events) lines.push(CSV_COLUMNS.map((c) => csvCell(e[c])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
