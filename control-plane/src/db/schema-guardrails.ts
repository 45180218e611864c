import type { ColumnType, Generated } from 'kysely';
import type { DetectorConfig } from '../modules/guardrails/compile.ts';

/**
 * Guardrail rule sets (guardrails module): detectors with an action per direction. Deleting one deletes the
 * row; policies that named it keep its id in their (content-addressed) text and skip it.
 */
export interface GuardrailsTable {
  id: string;
  /** Insertion order: lists are newest first. */
  seq: Generated<number>;
  account_id: string;
  name: string | null;
  detectors: ColumnType<DetectorConfig[], string, string>;
  created_at: Date;
}

/**
 * Policies (policies module), stored once per distinct content per account: `canonical` is the policy's RFC
 * 8785 text, `sha256` its digest, the id derived from both (and from `generation`, the number of revoked
 * policies of the same content before it, so a content attached again after a revocation gets a new id).
 */
export interface PoliciesTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  sha256: string;
  canonical: string;
  generation: number;
  created_at: Date;
  revoked_at: Date | null;
}
