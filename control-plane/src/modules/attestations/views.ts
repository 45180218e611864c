import type { Clock } from '@svc/shared';
import type { Anchors } from '../anchors/service.ts';
import { ANCHOR_KIND, DISCLAIMER, reportedStatus, type AttestationDocument } from './record.ts';
import type { EvidenceRow, RecordRow } from './store.ts';

const SCHEME = 'eip191-personal_sign/rfc8785';

export const HISTORY_NOTE =
  'Every version as it was signed, newest first. A version is never changed: a refresh adds the next one, which names the one it supersedes and its sha256. ' +
  'status is recomputed against each version\'s freshness window; status_at_check is what the check found.';

export const HOW_TO_VERIFY =
  'Recover the signer of record.canonical with EIP-191 (personal_sign) and compare it with GET /v1/receipts/pubkey. ' +
  'Each reading names the exact JSON-RPC request sent: send it to any node of the chain (pinned readings ask for the record\'s block) and compare the sha256 of the answer with the reading\'s; ' +
  'decode the result to get the value. anchor proves the record\'s sha256 existed no later than its anchoring block.';

/** How the attestation routes show records: the private view, history, evidence and the unattributed public view. */
export class AttestationViews {
  constructor(
    private readonly anchors: Anchors,
    private readonly clock: Clock,
  ) {}

  private base(row: RecordRow) {
    const doc = JSON.parse(row.document) as AttestationDocument;
    return {
      doc,
      status: reportedStatus(row.status_at_check, row.fresh_until, this.clock.now()),
      record: { canonical: row.document, sha256: row.document_sha256, signature: row.signature, signer: doc.signer, scheme: SCHEME },
    };
  }

  async record(row: RecordRow, track = false) {
    const anchor = track ? await this.anchors.track(ANCHOR_KIND, row.id, row.document_sha256) : await this.anchors.field(ANCHOR_KIND, row.id, row.document_sha256);
    return this.shape(row, anchor);
  }

  private shape(row: RecordRow, anchor: Awaited<ReturnType<Anchors['field']>>) {
    const { doc, status, record } = this.base(row);
    return {
      id: row.id,
      object: 'attestation' as const,
      asset_id: row.asset_id,
      version: row.version,
      status,
      status_at_check: row.status_at_check,
      subject_ref: row.subject_ref,
      subject: doc.subject,
      block: doc.block,
      readings: doc.readings,
      discrepancies: doc.discrepancies,
      unavailable: doc.unavailable,
      public_inputs: row.public_inputs,
      supersedes: doc.supersedes,
      checked_at: doc.checked_at,
      freshness_seconds: doc.freshness_seconds,
      fresh_until: doc.fresh_until,
      record: { document: doc as unknown as Record<string, unknown>, ...record },
      receipt_id: row.receipt_id,
      anchor,
    };
  }

  async history(assetId: string, rows: RecordRow[]) {
    const anchors = await this.anchors.fields(ANCHOR_KIND, rows.map((r) => ({ ref: r.id, hash: r.document_sha256 })));
    return { versions: rows.map((r, i) => this.shape(r, anchors[i]!)), asset_id: assetId, subject_ref: rows[0]!.subject_ref, note: HISTORY_NOTE, disclaimer: DISCLAIMER };
  }

  evidence(row: RecordRow, evidence: Array<Omit<EvidenceRow, 'body'> & { body?: Uint8Array | null }>, withBodies: boolean) {
    const doc = JSON.parse(row.document) as AttestationDocument;
    const source = (kind: string, request: string) => (kind === 'https' ? safeOrigin(request.replace(/^GET /, '')) : `eip155:${doc.subject.chain_id}`);
    return {
      object: 'attestation.evidence' as const,
      asset_id: row.asset_id,
      record_id: row.id,
      version: row.version,
      block: doc.block,
      readings: doc.readings.map((r, i) => {
        const e = evidence[i];
        return {
          name: r.name,
          kind: r.kind,
          pinned: r.pinned,
          request: r.request,
          value: r.value,
          outcome: r.outcome,
          sha256: r.sha256,
          bytes: r.bytes,
          read_at: r.read_at,
          source: source(r.kind, r.request),
          ...(withBodies ? { body_base64: e?.body ? Buffer.from(e.body).toString('base64') : null } : {}),
        };
      }),
    };
  }

  /** The unattributed public view: no account, key or receipt; the signed record and its readings. */
  async public(row: RecordRow) {
    const { doc, status, record } = this.base(row);
    return {
      object: 'asset_verification' as const,
      asset_id: row.asset_id,
      status,
      status_at_check: row.status_at_check,
      subject: doc.subject,
      block: doc.block,
      readings: doc.readings,
      discrepancies: doc.discrepancies,
      checked_at: doc.checked_at,
      fresh_until: doc.fresh_until,
      record,
      anchor: await this.anchors.field(ANCHOR_KIND, row.id, row.document_sha256),
      how_to_verify: HOW_TO_VERIFY,
      disclaimer: DISCLAIMER,
    };
  }
}

function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}
