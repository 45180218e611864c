/** The `attestation.*` webhook events, with what each carries (listed in webhooks/events.ts). */
export const ATTESTATION_EVENTS = {
  'attestation.verified':
    'An attestation version (check or refresh) is VERIFIED and the version before it was not (or there was none); data: {asset_id, record_id, version, status, previous_status, previous_record_id, block_number, discrepancies, unavailable, changed}.',
  'attestation.discrepancy':
    'An attestation version found a claimed fact differing from what was read, and the version before it was not DISCREPANCY (or there was none); data as attestation.verified.',
  'attestation.unavailable':
    'An attestation version could not read a source (unreachable or unconfigured) and found no discrepancy, and the version before it was not UNAVAILABLE (or there was none); data as attestation.verified.',
  'attestation.changed':
    'A refresh kept the status of the version before it but read a different value for some fact (the supply moved, a reserve balance changed); data as attestation.verified, `changed` naming the facts.',
} as const;
