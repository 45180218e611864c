import type { WebhookEventType } from '../webhooks/events.ts';
import type { AttestationDocument } from './record.ts';
import type { ATTESTATION_EVENTS } from './event-types.ts';

type AttestationEventType = keyof typeof ATTESTATION_EVENTS & WebhookEventType;

/**
 * The event a new version fires, if any: the status's own event when the status differs from the previous
 * version's (or on the first version), else attestation.changed when some reading's value differs; none
 * when nothing changed.
 */
export function attestationEvent(prev: AttestationDocument | null, doc: AttestationDocument): { type: AttestationEventType; data: Record<string, unknown> } | null {
  const before = new Map((prev?.readings ?? []).map((r) => [r.name, r.value]));
  const changed = prev ? doc.readings.filter((r) => r.pinned || r.kind === 'https').filter((r) => !before.has(r.name) || before.get(r.name) !== r.value).map((r) => r.name).filter((n) => n !== 'block') : [];
  const statusChanged = !prev || prev.status !== doc.status;
  if (!statusChanged && changed.length === 0) return null;
  const type = (statusChanged ? `attestation.${doc.status.toLowerCase()}` : 'attestation.changed') as AttestationEventType;
  return {
    type,
    data: {
      asset_id: doc.asset_id,
      record_id: doc.record_id,
      version: doc.version,
      status: doc.status,
      previous_status: prev?.status ?? null,
      previous_record_id: prev?.record_id ?? null,
      block_number: doc.block?.number ?? null,
      discrepancies: doc.discrepancies,
      unavailable: doc.unavailable,
      changed,
    },
  };
}
