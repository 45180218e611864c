import type { Clock } from '@svc/shared';
import type { Anchors } from '../anchors/service.ts';
import type { EvidenceItem, Figures, NavStatus } from './compute.ts';
import type { NavRow } from './store.ts';

export const ANCHOR_KIND = 'nav';
const SCHEME = 'eip191-personal_sign/rfc8785';

export const HISTORY_NOTE =
  'Published versions, newest first, each as signed. Versions are never changed; unpublished versions are not listed. ' +
  'status is recomputed against each version\'s freshness window; status_at_calculation is what the calculation found.';
export const EVIDENCE_NOTE =
  'References only: what kind of source each input came from, its label, when it was retrieved and a sha256. ' +
  'Declared inputs (the book, declared prices) are keyed with a salt sealed with the book, so they reveal nothing; ' +
  'HTTPS and on-chain inputs carry the sha256 of the bytes read.';

interface NavDocument {
  version: number;
  supersedes: string | null;
  currency: string;
  status: NavStatus;
  missing: string[];
  figures: Figures | null;
  evidence: EvidenceItem[];
  computed_at: string;
  fresh_until: string;
  signer: string;
}

/** How NAV versions are shown: to their owner (with the receipt) and publicly (published versions only). */
export class NavViews {
  constructor(
    private readonly anchors: Anchors,
    private readonly clock: Clock,
  ) {}

  private shape(row: NavRow, anchor: Awaited<ReturnType<Anchors['field']>>) {
    const doc = JSON.parse(row.document) as NavDocument;
    return {
      nav_id: row.id,
      object: 'nav_record' as const,
      asset_id: row.asset_id,
      version: row.version,
      status: this.clock.now().getTime() > row.fresh_until.getTime() ? ('STALE' as const) : row.status_at_calculation,
      status_at_calculation: row.status_at_calculation,
      currency: doc.currency,
      figures: doc.figures,
      missing: doc.missing,
      evidence: doc.evidence,
      computed_at: doc.computed_at,
      fresh_until: doc.fresh_until,
      supersedes: doc.supersedes,
      published: row.published_at !== null,
      published_at: row.published_at?.toISOString() ?? null,
      record: { canonical: row.document, sha256: row.document_sha256, signature: row.signature, signer: doc.signer, scheme: SCHEME },
      anchor,
    };
  }

  async owner(row: NavRow) {
    return { ...this.shape(row, await this.anchors.track(ANCHOR_KIND, row.id, row.document_sha256)), receipt_id: row.receipt_id };
  }

  async public(row: NavRow) {
    return this.shape(row, await this.anchors.field(ANCHOR_KIND, row.id, row.document_sha256));
  }

  async history(assetId: string, rows: NavRow[]) {
    const anchors = await this.anchors.fields(ANCHOR_KIND, rows.map((r) => ({ ref: r.id, hash: r.document_sha256 })));
    return { records: rows.map((r, i) => this.shape(r, anchors[i]!)), asset_id: assetId, note: HISTORY_NOTE };
  }

  evidence(row: NavRow) {
    const doc = JSON.parse(row.document) as NavDocument;
    return { object: 'nav_record.evidence' as const, asset_id: row.asset_id, nav_id: row.id, version: row.version, evidence: doc.evidence, note: EVIDENCE_NOTE };
  }
}
