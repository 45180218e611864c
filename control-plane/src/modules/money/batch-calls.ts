import { sql, type Kysely } from 'kysely';
import type { BillingConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { ReceiptPayload, SignedReceipt } from '@svc/shared';
import type { LeaseAsk } from './leases.ts';
import type { Hold, Usage } from './types.ts';

/*
 * The money path's batched database calls: the items Metering hands to svc_hold_many and svc_settle_many
 * (migrations 0011, 0402, 0700) and what each answers per item.
 */

export interface HoldItem {
  id: string;
  account: string;
  chain: string[];
  amount: number;
  request: string;
  run: string | null;
  lease?: LeaseAsk;
}
export interface HoldResult {
  id: string;
  outcome: string;
  key_id: string | null;
  balance: number;
  held: number;
  leased?: number;
  recall?: boolean;
  lease?: number;
  lease_gone?: boolean;
  run_head: string | null;
  run_count: number | null;
  error?: string;
}
export interface SettleItem {
  hold: string;
  account: string;
  chain: string[];
  cost: number;
  event: string;
  kind: string;
  route: string;
  model: string | null;
  units: Record<string, number | string>;
  receipt: string;
  payload: string;
  hash: string;
  signature: string;
  run: string | null;
  prev: string | null;
  seq: number | null;
  lease: boolean;
  /** Write-behind: what the request reserved from its lease (given back to the lease when the settle commits); not read by the database. */
  reserved?: number;
}
export interface SettleResult {
  hold: string;
  outcome: string;
  balance: number | null;
  run_head: string | null;
  run_count: number | null;
  error?: string;
}

/**
 * Runs a batch; a deadlock victim (there should be none, given the lock order) is run again, and a batch
 * that fails for any other reason is split so that only the faulty item fails.
 */
export async function runBatch<I, O>(items: I[], run: (items: I[]) => Promise<O[]>): Promise<O[]> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run(items);
    } catch (e) {
      if ((e as { code?: string }).code === '40P01' && attempt < 2) continue;
      if (items.length === 1) throw e;
      const out: O[] = [];
      for (const item of items) out.push(await run([item]).then((o) => o[0]!, (err: unknown) => ({ outcome: 'error', error: String(err) }) as O));
      return out;
    }
  }
}

/** Places a batch of holds (and lease asks) in one round trip; answers in the items' order. */
export async function holdMany(db: Kysely<DB>, now: Date, cfg: BillingConfig, items: HoldItem[]): Promise<HoldResult[]> {
  const expires = new Date(now.getTime() + cfg.holdTtlSeconds * 1000);
  const r = await sql<{ out: HoldResult[] }>`
    select svc_hold_many(${JSON.stringify(items)}::jsonb, ${cfg.enforced}, ${now}, ${expires},
      ${cfg.breakerWindowSeconds}, ${cfg.breakerLimitMicroUsd}::bigint, ${new Date(now.getTime() + cfg.leaseSeconds * 1000)}) as out`.execute(db);
  const byId = new Map(r.rows[0]!.out.map((o) => [o.id, o]));
  return items.map((i) => byId.get(i.id)!);
}

/** Where a settle item keeps its JSON text once written (a symbol: JSON.stringify leaves it out). */
const JSON_TEXT = Symbol('settle item JSON');

/**
 * A settle item's JSON text, made once: a write-behind settle is written to the journal and then sent to
 * the database in the same words. Items are not changed once made.
 */
export function settleJson(item: SettleItem): string {
  const it = item as SettleItem & { [JSON_TEXT]?: string };
  return (it[JSON_TEXT] ??= JSON.stringify(item));
}

/** Settles a batch in one transaction (ledger entries, usage events, receipts, run chains); answers in the items' order. */
export async function settleMany(db: Kysely<DB>, now: Date, cfg: BillingConfig, items: SettleItem[]): Promise<SettleResult[]> {
  const r = await sql<{ out: SettleResult[] }>`
    select svc_settle_many(${`[${items.map(settleJson).join(',')}]`}::jsonb, ${now}, ${cfg.breakerWindowSeconds}) as out`.execute(db);
  return answersInOrder(items, r.rows[0]!.out);
}

/**
 * svc_settle_many answers the run-chain items first (each with its own hold id), then the others in batch
 * order. Those cannot be matched by hold id: the settles of one credit lease all carry the lease's id, and
 * each has its own balance after.
 */
function answersInOrder(items: SettleItem[], out: SettleResult[]): SettleResult[] {
  const runs = items.filter((i) => i.run !== null).length;
  const byHold = new Map(out.slice(0, runs).map((o) => [o.hold, o]));
  let next = runs;
  return items.map((i) => {
    const o = i.run !== null ? byHold.get(i.hold) : out[next++];
    if (o?.hold !== i.hold) throw new Error(`svc_settle_many answered out of order at hold ${i.hold}`);
    return o;
  });
}

/**
 * The receipt of a settle, to be signed by `signer` (`prev`, `count`: the run chain's head). Its keys are
 * written in canonical (code-unit) order, so that canonicalize can take its JSON.stringify path (which
 * drops a `detail`, `context`, `engine` or `guardrails` left undefined); any order would sign the same bytes.
 */
export function receiptPayload(hold: Hold, usage: Usage, usageEventId: string, now: Date, prev: string | null, count: number, signer: string): ReceiptPayload {
  return {
    account_id: hold.accountId,
    context: usage.context,
    cost_micro_usd: usage.costMicroUsd,
    created_at: now.toISOString(),
    detail: usage.detail,
    engine: usage.engine,
    guardrails: usage.guardrails,
    id: hold.requestId,
    key_id: hold.chain[0] ?? null,
    kind: usage.kind,
    model: usage.model ?? null,
    policy: usage.policy ?? hold.policy ?? null,
    route: hold.route,
    run: hold.runId ? { id: hold.runId, prev, seq: count + 1 } : null,
    signer,
    units: usage.units,
    usage_event_id: usageEventId,
    v: 1,
  };
}

/** The batch item that records a settle with its signed receipt (`reserved`: write-behind, see SettleItem). */
export function settleItem(hold: Hold, usage: Usage, usageEventId: string, receipt: SignedReceipt, prev: string | null, count: number, reserved?: number): SettleItem {
  return {
    hold: hold.id,
    account: hold.accountId,
    chain: hold.chain,
    cost: usage.costMicroUsd,
    event: usageEventId,
    kind: usage.kind,
    route: hold.route,
    model: usage.model ?? null,
    units: usage.units,
    receipt: hold.requestId,
    payload: receipt.canonical,
    hash: receipt.hash,
    signature: receipt.signature,
    run: hold.runId,
    prev: hold.runId ? prev : null,
    seq: hold.runId ? count + 1 : null,
    lease: hold.lease,
    reserved,
  };
}
