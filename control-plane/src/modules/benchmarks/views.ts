import type { BenchmarkRow, ResultRow } from './store.ts';

const SCHEME = 'eip191-personal_sign/rfc8785';

export const HISTORY_NOTE =
  'Every result version, newest first, each as signed under the methodology it states. A result is never recomputed under a newer methodology: a refresh adds a version computed under the current one.';

/** A result version as signed (its document's own figures and peers) with the signature. */
export function resultView(r: ResultRow) {
  const doc = JSON.parse(r.document) as { own: unknown; peers: unknown; signer: string };
  return {
    version: r.version,
    methodology_version: r.methodology_version,
    computed_at: r.computed_at.toISOString(),
    own: doc.own as Array<{ asset_class: string; weight_pct: string; peer_position: 'below' | 'within' | 'above' | null }>,
    peers: doc.peers as {
      status: 'released' | 'suppressed';
      reason: string | null;
      release_id: string | null;
      participants_band: string;
      figures: Array<{ asset_class: string; status: 'released' | 'suppressed'; mean_weight_bucket: string | null; holders_band: string | null }>;
    },
    record: { canonical: r.document, sha256: r.document_sha256, signature: r.signature, signer: doc.signer, scheme: SCHEME },
    receipt_id: r.receipt_id,
  };
}

/** A benchmark with its latest result and where it stands against its retention. */
export function benchmarkView(b: BenchmarkRow, latest: ResultRow, versions: number, now: Date) {
  return {
    id: b.id,
    object: 'benchmark' as const,
    cohort: b.cohort,
    created_at: b.created_at.toISOString(),
    holdings_sha256: b.holdings_sha256,
    retention: {
      retain_until: b.retain_until.toISOString(),
      holdings: b.holdings_sealed && b.retain_until.getTime() > now.getTime() ? ('sealed' as const) : ('destroyed' as const),
      destroyed_at: b.destroyed_at?.toISOString() ?? null,
      seconds_remaining: Math.max(0, Math.floor((b.retain_until.getTime() - now.getTime()) / 1000)),
    },
    versions,
    latest: resultView(latest),
  };
}
