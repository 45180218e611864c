import type { FastifyReply } from 'fastify';
import { RECEIPT_HEADERS, type SignedReceipt } from '@svc/shared';

/** Puts a signed receipt on a billable response. */
export function setReceiptHeaders(reply: FastifyReply, receipt: SignedReceipt): void {
  reply.header(RECEIPT_HEADERS.id, receipt.payload.id);
  reply.header(RECEIPT_HEADERS.payload, Buffer.from(receipt.canonical).toString('base64url'));
  reply.header(RECEIPT_HEADERS.signature, receipt.signature);
  reply.header(RECEIPT_HEADERS.signer, receipt.payload.signer);
  reply.header(RECEIPT_HEADERS.cost, String(receipt.payload.cost_micro_usd));
}

/** The receipt as the final SSE event of a stream carries the same fields. */
export function receiptEvent(receipt: SignedReceipt) {
  return { id: receipt.payload.id, receipt: receipt.payload, canonical: receipt.canonical, hash: receipt.hash, signature: receipt.signature, signer: receipt.payload.signer };
}
