import { checkChain, type ChainCheck } from './integrity.ts';
import type { RunReceiptRow, RunRow } from './runs.ts';
import { spanSeconds } from './runs.ts';
import type { AnchorField } from '../anchors/service.ts';

export function chainOf(run: RunRow, receipts: RunReceiptRow[], signer: string): ChainCheck {
  return checkChain(
    { id: run.id, account_id: run.account_id, head_hash: run.head_hash, receipt_count: run.receipt_count, total_cost_micro_usd: run.total_cost_micro_usd },
    receipts,
    signer,
  );
}

/**
 * The run proof document (signed by the caller): what the run records, whether its receipts recompute to it,
 * and the public anchor of its head hash (queued when a proof is first asked for at that head).
 */
export function proofDocument(run: RunRow, receipts: RunReceiptRow[], signer: string, now: Date, anchor: AnchorField) {
  const chain = chainOf(run, receipts, signer);
  return {
    type: 'svc.run_proof' as const,
    version: 1 as const,
    run_id: run.id,
    account_id: run.account_id,
    head_hash: run.head_hash,
    receipt_count: run.receipt_count,
    total_cost_micro_usd: run.total_cost_micro_usd,
    span: { first_at: run.first_at.toISOString(), last_at: run.last_at.toISOString(), seconds: spanSeconds(run) },
    chain_valid: chain.chain_valid,
    failures: chain.failures,
    anchor,
    signer,
    generated_at: now.toISOString(),
  };
}
