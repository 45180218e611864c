import { encodeFunctionData } from 'viem';
import { receiptHash, toHex, type Hex } from '@svc/shared';
import { signatureParts } from './check.ts';

/** The claim function of the reference escrow (contracts/escrow/ReceiptEscrow.sol). */
export const CLAIM_FUNCTION = 'claim(string jobId, bytes payload, bytes signature)';
export const CLAIM_ABI = [
  {
    type: 'function',
    name: 'claim',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'jobId', type: 'string' },
      { name: 'payload', type: 'bytes' },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [],
  },
] as const;

/**
 * The arguments of `claim` for one receipt, exactly: the payload bytes as signed (the stored canonical text,
 * UTF-8), the 65-byte signature as stored, and the job id; with the ABI-encoded call when a job id can be named.
 * The rest is there to check by hand: the EIP-191 digest ecrecover takes, the signature split, the signer the
 * escrow must trust.
 */
export function claimInputs(payload: string, signature: string, jobId: string | null, signer: string) {
  const bytes = toHex(new TextEncoder().encode(payload));
  const sig = /^0x[0-9a-fA-F]{130}$/.test(signature) ? (signature as Hex) : null;
  const parts = signatureParts(payload, signature);
  return {
    function: CLAIM_FUNCTION,
    args: { jobId, payload: bytes, signature },
    calldata: jobId !== null && sig ? encodeFunctionData({ abi: CLAIM_ABI, functionName: 'claim', args: [jobId, bytes, sig] }) : null,
    payload_text: payload,
    payload_length: (bytes.length - 2) / 2,
    payload_hash: receiptHash(payload),
    digest: parts.digest,
    v: parts.v,
    r: parts.r,
    s: parts.s,
    signer,
  };
}
