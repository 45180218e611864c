import { verifyPage, type CheckState, type PageData } from './verify.ts';
import { runVerification } from './verify-runner.ts';

/** The public pages' script (receipts, sealed calls): their checks, run in the visitor's browser (verify-runner.ts). */
const LABELS: Record<string, Record<CheckState, string>> = {
  signature: { ok: 'The EIP-191 signature recovers the published signer', failed: 'The signature does not recover the published signer', absent: '' },
  binding: { ok: 'The signed payload names what this page shows', failed: 'The signed payload does not name what this page shows', absent: '' },
  commitment: { ok: 'sha256(salt || text) equals the commitment', failed: 'sha256(salt || text) differs from the commitment', absent: 'Not revealed: nothing to recompute yet' },
  anchor: { ok: 'The inclusion proof leads to the batch root', failed: 'The inclusion proof does not lead to the batch root', absent: 'Not in an anchor batch yet' },
};

void runVerification<PageData>(LABELS, verifyPage);
