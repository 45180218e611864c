import { checksumAddress } from '@svc/shared';
import type { AnchorField } from '../anchors/service.ts';
import type { ObjectMeta, PartyRow, PlanMeta } from './store.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** When a plan in warning may be released at the earliest (the grace period counts from the warning). */
export function releaseEarliest(p: Pick<PlanMeta, 'status' | 'warned_at' | 'grace_seconds'>): Date | null {
  return p.status === 'warning' && p.warned_at ? new Date(p.warned_at.getTime() + p.grace_seconds * 1000) : null;
}

export function objectView(o: ObjectMeta) {
  return { id: o.id, name: o.name, content_type: o.content_type, byte_len: o.byte_len, sha256: o.sha256, created_at: o.created_at.toISOString() };
}

/** A plan as its owner's list shows it: state, deadlines and counts; no content. */
export function planSummary(p: PlanMeta, parties: PartyRow[], objects: ObjectMeta[]) {
  const attesters = parties.filter((x) => x.role === 'attester');
  return {
    id: p.id,
    object: 'legacy_plan' as const,
    name: p.name,
    status: p.status,
    checkin_interval_seconds: p.checkin_interval_seconds,
    grace_seconds: p.grace_seconds,
    deadline_at: p.deadline_at.toISOString(),
    warned_at: iso(p.warned_at),
    release_earliest_at: iso(releaseEarliest(p)),
    released_at: iso(p.released_at),
    cancelled_at: iso(p.cancelled_at),
    last_checkin_at: iso(p.last_checkin_at),
    created_at: p.created_at.toISOString(),
    beneficiary_count: parties.length - attesters.length,
    attester_count: attesters.length,
    quorum: p.quorum,
    confirmations: attesters.filter((a) => a.confirmed_at).length,
    object_count: objects.length,
    note_bytes: p.note_bytes,
  };
}

export interface EventRow {
  seq: number;
  type: string;
  at: Date;
  canonical: string;
  prev_hash: string;
  hash: string;
}

/** The owner's detail: parties, object metadata and the chained events with their anchor state. */
export function planDetail(p: PlanMeta, parties: PartyRow[], objects: ObjectMeta[], events: EventRow[], anchors: AnchorField[]) {
  return {
    ...planSummary(p, parties, objects),
    content_version: p.content_version,
    beneficiaries: parties
      .filter((x) => x.role === 'beneficiary')
      .map((b) => ({ wallet: checksumAddress(b.wallet), label: b.label, claim_link: b.claim_token_hash ? ('live' as const) : ('killed' as const), claimed_at: iso(b.claimed_at) })),
    attesters: parties.filter((x) => x.role === 'attester').map((a) => ({ wallet: checksumAddress(a.wallet), label: a.label, confirmed_at: iso(a.confirmed_at) })),
    objects: objects.map(objectView),
    events: events.map((e, i) => ({
      seq: e.seq,
      type: e.type,
      at: e.at.toISOString(),
      data: (JSON.parse(e.canonical) as { data: Record<string, unknown> }).data,
      canonical: e.canonical,
      prev_hash: e.prev_hash,
      hash: e.hash,
      anchor: anchors[i]!,
    })),
    head_hash: p.head_hash,
  };
}
