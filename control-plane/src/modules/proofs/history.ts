import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { checkReceipt } from './integrity.ts';
import { chainOf } from './proof.ts';
import { Runs } from './runs.ts';

/** What an account can prove from its stored receipts, recomputed now. */
export interface ProvableHistory {
  /** Runs whose chain recomputes (integrity.ts `checkChain`), each with at least one receipt. */
  verified_runs: number;
  /** Stored receipts that verify on their own: canonical text, sha256 hash, signature recovering to the signer. */
  receipts: number;
  /** Head hashes of the verified runs, ascending. */
  run_heads: string[];
  /** What was looked at: runs and receipts, verified or not. */
  runs_checked: number;
  receipts_checked: number;
}

const RUN_PAGE = 200;
const RECEIPT_PAGE = 1000;

/**
 * An account's provable history, counted from its stored receipts with the integrity checks of this module:
 * every run's chain is recomputed (a valid chain has verified every receipt in it, so they all count);
 * receipts of a run whose chain does not recompute, and receipts outside any run, count one by one when they
 * verify. Reads page by page, so an account with many receipts is never held in memory at once.
 */
export async function provableHistory(db: Kysely<DB>, accountId: string, signer: string): Promise<ProvableHistory> {
  const runs = new Runs(db);
  const out: ProvableHistory = { verified_runs: 0, receipts: 0, run_heads: [], runs_checked: 0, receipts_checked: 0 };
  for (let after: string | null = null; ; ) {
    let q = db.selectFrom('runs').select('id').where('account_id', '=', accountId);
    if (after !== null) q = q.where('id', '>', after);
    const page = await q.orderBy('id').limit(RUN_PAGE).execute();
    for (const { id } of page) {
      const { run, receipts } = await runs.load(accountId, id);
      out.runs_checked += 1;
      out.receipts_checked += receipts.length;
      if (receipts.length > 0 && chainOf(run, receipts, signer).chain_valid) {
        out.verified_runs += 1;
        out.run_heads.push(run.head_hash);
        out.receipts += receipts.length;
      } else {
        for (const r of receipts) if (checkReceipt(r, signer).valid) out.receipts += 1;
      }
    }
    if (page.length < RUN_PAGE) break;
    after = page[page.length - 1]!.id;
  }
  for (let after: string | null = null; ; ) {
    let q = db.selectFrom('receipts').select(['id', 'payload', 'hash', 'signature']).where('account_id', '=', accountId).where('run_id', 'is', null);
    if (after !== null) q = q.where('id', '>', after);
    const page = await q.orderBy('id').limit(RECEIPT_PAGE).execute();
    out.receipts_checked += page.length;
    for (const r of page) if (checkReceipt(r, signer).valid) out.receipts += 1;
    if (page.length < RECEIPT_PAGE) break;
    after = page[page.length - 1]!.id;
  }
  out.run_heads.sort();
  return out;
}
