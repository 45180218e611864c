import { InvalidArgumentError, type Command } from 'commander';
import { readDateTime } from '@svc/shared';
import type { SvcClient, Usage, UsageEvent } from '@svc/shared/client';
import { context, sessionClient } from '../context.ts';
import { usageError } from '../errors.ts';
import { fields, table, usd } from '../output.ts';
import { progress, type Progress } from '../progress.ts';

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 } as const;
const PAGE = 1000;

/** An ISO 8601 date-time, or a duration back from now: 30m, 24h, 7d, 2w. */
export function sinceValue(value: string, now = Date.now()): string {
  const rel = /^(\d{1,6})([mhdw])$/.exec(value.trim());
  if (rel) return new Date(now - Number(rel[1]) * UNIT_MS[rel[2] as keyof typeof UNIT_MS]).toISOString();
  const r = readDateTime(value.trim());
  if (!r.ok) throw new InvalidArgumentError(`expected an ISO 8601 date-time (2026-11-01T00:00:00Z) or a duration back from now (30m, 24h, 7d, 2w): ${r.reason}`);
  return r.date.toISOString();
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < 1 || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected a whole number, at least 1');
  return n;
}

function units(u: UsageEvent['units']): string {
  return Object.entries(u)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function eventsTable(events: readonly UsageEvent[]): string {
  if (events.length === 0) return 'No usage events.';
  return table(
    ['TIME', 'KIND', 'MODEL', 'UNITS', 'COST', 'RECEIPT'],
    events.map((e) => [e.created_at, e.kind, e.model ?? '-', units(e.units), usd(e.cost_micro_usd), e.receipt_id]),
  );
}

function summaryText(u: Usage): string {
  const lines = [fields([['events', String(u.totals.events)], ['spent', usd(u.totals.cost_micro_usd)]])];
  if (u.totals.by_kind.length) lines.push('', table(['KIND', 'EVENTS', 'COST'], u.totals.by_kind.map((k) => [k.kind, String(k.events), usd(k.cost_micro_usd)])));
  if (u.daily.length) lines.push('', table(['DAY', 'EVENTS', 'COST'], u.daily.map((d) => [d.date, String(d.events), usd(d.cost_micro_usd)])));
  lines.push('', 'Latest events:', eventsTable(u.events));
  return lines.join('\n');
}

/** Pages through the events, newest first, up to `limit`. */
async function allEvents(client: SvcClient, since: string | undefined, limit: number, spin: Progress): Promise<{ events: UsageEvent[]; more: boolean }> {
  const events: UsageEvent[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.usageEvents({ limit: Math.min(PAGE, limit - events.length), ...(since ? { since } : {}), ...(cursor ? { cursor } : {}) });
    events.push(...page.events);
    spin.update(`fetched ${events.length} events`);
    if (!page.next_cursor) return { events, more: false };
    if (events.length >= limit) return { events, more: true };
    cursor = page.next_cursor;
  }
}

/** The same as CSV: the header line once, then every page's rows. */
async function allCsv(client: SvcClient, since: string | undefined, limit: number, spin: Progress): Promise<{ csv: string; rows: number; more: boolean }> {
  let header: string | undefined;
  const rows: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.usageEventsCsv({ limit: Math.min(PAGE, limit - rows.length), ...(since ? { since } : {}), ...(cursor ? { cursor } : {}) });
    const lines = page.csv.split(/\r?\n/).filter((l) => l !== '');
    header ??= lines[0];
    rows.push(...lines.slice(1));
    spin.update(`fetched ${rows.length} events`);
    const more = page.next_cursor !== null;
    if (!more || rows.length >= limit) return { csv: [header ?? '', ...rows].join('\n') + '\n', rows: rows.length, more };
    cursor = page.next_cursor!;
  }
}

export function registerUsage(program: Command): void {
  program
    .command('usage')
    .description('What you spent: totals, by kind and by day, and the latest events; with --since or --csv, the events themselves')
    .option('--since <when>', 'events since an ISO 8601 date-time or a duration back from now (24h, 7d)', (v) => sinceValue(v))
    .option('--csv', 'the events as CSV on stdout (all of them, or those since --since)')
    .option('--limit <n>', `at most this many events (default ${10 * PAGE})`, positiveInt)
    .action(async (opts: { since?: string; csv?: boolean; limit?: number }, cmd: Command) => {
      const ctx = context(cmd);
      if (opts.csv && ctx.out.json) throw usageError('--csv and --json ask for two different outputs', 'pass one of them');
      const { client } = sessionClient(ctx);
      if (!opts.since && !opts.csv && opts.limit === undefined) {
        const u = await client.usage();
        ctx.out.result(u, () => summaryText(u));
        return;
      }
      const limit = opts.limit ?? 10 * PAGE;
      const spin = progress('fetching usage events', { plain: false });
      try {
        if (opts.csv) {
          const r = await allCsv(client, opts.since, limit, spin);
          spin.stop();
          process.stdout.write(r.csv);
          if (r.more) ctx.out.note(`note: stopped at ${r.rows} events; pass --limit or --since for more`);
          return;
        }
        const r = await allEvents(client, opts.since, limit, spin);
        spin.stop();
        ctx.out.result(ctx.out.json ? { events: r.events, more: r.more } : r.events, () => eventsTable(r.events));
        if (r.more) ctx.out.note(`note: stopped at ${r.events.length} events; pass --limit or --since for more`);
      } finally {
        spin.stop();
      }
    });
}
