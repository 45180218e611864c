import type { SignedReceipt } from '@svc/shared';

/** `_meta` keys of a metered call's result: the receipt id, and the signed receipt itself. */
export const RECEIPT_ID_META = 'svc/receipt_id';
export const RECEIPT_META = 'svc/receipt';

/**
 * The receipt of a tool call as it rides in the result's `_meta`: its id, and what anyone needs to verify it
 * offline (the canonical text that was signed, its hash, the EIP-191 signature and the signer's address).
 */
export function receiptMeta(r: SignedReceipt): Record<string, unknown> {
  return {
    [RECEIPT_ID_META]: r.payload.id,
    [RECEIPT_META]: { id: r.payload.id, canonical: r.canonical, hash: r.hash, signature: r.signature, signer: r.payload.signer, cost_micro_usd: r.payload.cost_micro_usd },
  };
}
