import type { CheckState } from '../pages/verify.ts';
import { runVerification } from '../pages/verify-runner.ts';
import { verifyVerdictPage, type VerdictPageData } from './verify.ts';

/** The verdict page's script: its checks, run in the visitor's browser as the other public pages' are (verify-runner.ts). */
const LABELS: Record<string, Record<CheckState, string>> = {
  signature: { ok: 'The EIP-191 signature of the outcome recovers the published signer', failed: 'The signature does not recover the published signer', absent: '' },
  binding: { ok: 'The signed outcome names this verdict', failed: 'The signed outcome does not name this verdict', absent: '' },
  fingerprints: { ok: 'The question and every rationale hash to their signed sha256 fingerprints', failed: 'A question or rationale differs from its signed fingerprint', absent: '' },
  evidence: { ok: 'The evidence root recomputes from the signed labels and content hashes', failed: 'The evidence root does not recompute', absent: '' },
  tally: { ok: 'The tally and outcome recount from the signed votes', failed: 'The tally or outcome does not recount from the votes', absent: '' },
  anchor: { ok: 'The inclusion proof leads to the batch root', failed: 'The inclusion proof does not lead to the batch root', absent: 'Not in an anchor batch yet' },
};

void runVerification<VerdictPageData>(LABELS, verifyVerdictPage);
