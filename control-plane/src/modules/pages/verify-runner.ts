import type { CheckState } from './verify.ts';

/**
 * What every public page's script does in the browser (bundled with it by http/scripts.ts): reads the data
 * the page embeds (`#svc-data`), asks the gateway's published receipt signer (GET /v1/receipts/pubkey, same
 * origin), runs the page's checks and writes the verdict into the page: `#verdict[data-verdict=valid|invalid]`
 * and one `[data-check]` row per check, labelled from `labels`. The project's type library has no DOM, hence
 * the few shapes below.
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

export interface PageVerdict {
  checks: Record<string, CheckState>;
  recovered: string | null;
  valid: boolean;
  reasons: string[];
}

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

export async function runVerification<D extends { signer: string }>(labels: Record<string, Record<CheckState, string>>, verify: (data: D, signer: string) => PageVerdict): Promise<void> {
  const verdict = document.getElementById('verdict');
  const source = document.getElementById('svc-data');
  if (!verdict || !source) return;
  let data: D;
  try {
    data = JSON.parse(source.textContent ?? '') as D;
  } catch {
    verdict.dataset.verdict = 'invalid';
    verdict.className = 'verdict invalid';
    verdict.textContent = 'Invalid: the page data does not parse';
    return;
  }
  const signer = await publishedSigner(data.signer);
  const v = verify(data, signer.address);
  for (const [name, state] of Object.entries(v.checks)) {
    const row = document.querySelector(`[data-check="${name}"]`);
    if (!row) continue;
    row.dataset.state = state;
    row.className = `check ${state}`;
    row.textContent = `${state === 'ok' ? '✓' : state === 'failed' ? '✗' : '–'} ${labels[name]?.[state] ?? ''}`;
  }
  const recovered = document.getElementById('recovered');
  if (recovered) recovered.textContent = v.recovered ?? 'none';
  verdict.dataset.verdict = v.valid ? 'valid' : 'invalid';
  verdict.className = `verdict ${v.valid ? 'valid' : 'invalid'}`;
  verdict.textContent = v.valid
    ? `Valid: verified in your browser${signer.fetched ? '' : ' (against the signer shown here: the published one could not be fetched)'}`
    : `Invalid: ${v.reasons.join('; ')}`;
}

