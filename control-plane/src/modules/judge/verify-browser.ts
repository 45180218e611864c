import type { CheckState } from '../pages/verify.ts';
import { verifyVerdictPage, type VerdictPageData } from './verify.ts';

/**
 * The verdict page's script, bundled for the browser (assets.ts): reads the data the page embeds, asks the
 * gateway's published receipt signer (GET /v1/receipts/pubkey, same origin), checks everything in verify.ts
 * and writes the verdict into the page: `#verdict[data-verdict=valid|invalid]` and one `[data-check]` row per
 * check, as the other public pages do. The project's type library has no DOM, hence the few shapes below.
 */
interface El {
  textContent: string | null;
  className: string;
  dataset: Record<string, string | undefined>;
}
interface Doc {
  getElementById(id: string): El | null;
  querySelector(selector: string): El | null;
}
declare const document: Doc;

const LABELS: Record<string, Record<CheckState, string>> = {
  signature: { ok: 'The EIP-191 signature of the outcome recovers the published signer', failed: 'The signature does not recover the published signer', absent: '' },
  binding: { ok: 'The signed outcome names this verdict', failed: 'The signed outcome does not name this verdict', absent: '' },
  fingerprints: { ok: 'The question and every rationale hash to their signed sha256 fingerprints', failed: 'A question or rationale differs from its signed fingerprint', absent: '' },
  evidence: { ok: 'The evidence root recomputes from the signed labels and content hashes', failed: 'The evidence root does not recompute', absent: '' },
  tally: { ok: 'The tally and outcome recount from the signed votes', failed: 'The tally or outcome does not recount from the votes', absent: '' },
  anchor: { ok: 'The inclusion proof leads to the batch root', failed: 'The inclusion proof does not lead to the batch root', absent: 'Not in an anchor batch yet' },
};

async function publishedSigner(embedded: string): Promise<{ address: string; fetched: boolean }> {
  try {
    const r = await fetch('/v1/receipts/pubkey', { credentials: 'omit' });
    const body = (await r.json()) as { address?: unknown };
    if (r.ok && typeof body.address === 'string') return { address: body.address, fetched: true };
  } catch {
    // offline or blocked: compared with the signer the page shows instead (said in the verdict)
  }
  return { address: embedded, fetched: false };
}

async function main(): Promise<void> {
  const verdict = document.getElementById('verdict');
  const source = document.getElementById('svc-data');
  if (!verdict || !source) return;
  let data: VerdictPageData;
  try {
    data = JSON.parse(source.textContent ?? '') as VerdictPageData;
  } catch {
    verdict.dataset.verdict = 'invalid';
    verdict.className = 'verdict invalid';
    verdict.textContent = 'Invalid: the page data does not parse';
    return;
  }
  const signer = await publishedSigner(data.signer);
  const v = verifyVerdictPage(data, signer.address);
  for (const [name, state] of Object.entries(v.checks)) {
    const row = document.querySelector(`[data-check="${name}"]`);
    if (!row) continue;
    row.dataset.state = state;
    row.className = `check ${state}`;
    row.textContent = `${state === 'ok' ? '✓' : state === 'failed' ? '✗' : '–'} ${LABELS[name]?.[state] ?? ''}`;
  }
  const recovered = document.getElementById('recovered');
  if (recovered) recovered.textContent = v.recovered ?? 'none';
  verdict.dataset.verdict = v.valid ? 'valid' : 'invalid';
  verdict.className = `verdict ${v.valid ? 'valid' : 'invalid'}`;
  verdict.textContent = v.valid
    ? `Valid: verified in your browser${signer.fetched ? '' : ' (against the signer shown here: the published one could not be fetched)'}`
    : `Invalid: ${v.reasons.join('; ')}`;
}

void main();
