/** Names of the signed receipt headers on every billable response (the final SSE event carries the same fields). */
export const RECEIPT_HEADERS = {
  id: 'x-svc-receipt-id',
  payload: 'x-svc-receipt',
  signature: 'x-svc-signature',
  signer: 'x-svc-signer',
  cost: 'x-svc-cost-micro-usd',
} as const;

export const RECEIPT_HEADER_DOCS: Record<string, string> = {
  [RECEIPT_HEADERS.id]: 'Receipt id (the request id); re-fetch with GET /v1/receipts/{id}.',
  [RECEIPT_HEADERS.payload]: 'The receipt payload: base64url of its RFC 8785 canonical JSON.',
  [RECEIPT_HEADERS.signature]: 'EIP-191 signature (0x, 65 bytes) of the canonical JSON by the receipt signer.',
  [RECEIPT_HEADERS.signer]: 'Address of the receipt signer; equals GET /v1/receipts/pubkey.',
  [RECEIPT_HEADERS.cost]: 'Cost charged for this response in micro-USD.',
};

/**
 * The request header by which an inference call cites a source set of the caller's account (its id); the
 * call's receipt then carries the set's ordered root as `context.root` inside the signed payload.
 */
export const SOURCE_SET_HEADER = 'x-svc-source-set';
