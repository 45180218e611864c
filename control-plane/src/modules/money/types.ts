import type { ReceiptContext, ReceiptEngine, ReceiptGuardrails, ReceiptPolicy, SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';

/** The money path's records, shared by its steps (admit, settle, flush) and the routes that meter work. */

export interface HoldRequest {
  principal: KeyPrincipal;
  requestId: string;
  runId: string | null;
  /** The most this request can cost; settlement charges the actual cost. */
  maxCostMicroUsd: number;
  /** e.g. "POST /v1/notary/receipts"; recorded in the usage event and receipt. */
  route: string;
  /** Absolute URL of the resource, for the x402 terms of a 402. */
  resource: string;
  /**
   * A hold that outlives this process's request (a video job settled by the leader loop, maybe after a
   * restart) must be a row of its own; other holds may be admitted from a credit lease.
   */
  durable?: boolean;
}

export interface Hold {
  id: string;
  accountId: string;
  keyId: string;
  amount: number;
  requestId: string;
  runId: string | null;
  route: string;
  runHead: string | null;
  runCount: number;
  chain: string[];
  /** Admitted from a credit lease (`id` is the lease's): settled out of it, released in memory. */
  lease: boolean;
  /** The policy stamp of the key (its principal's), signed into the receipt. */
  policy?: ReceiptPolicy | null; // policies
}

export interface Usage {
  costMicroUsd: number;
  kind: string;
  model?: string | null;
  units: Record<string, number | string>;
  /** Extra metadata for the receipt (never content). */
  detail?: Record<string, unknown>;
  policy?: ReceiptPolicy | null;
  /** What the call cites (a source set's root), signed into the receipt as `context`. */
  context?: ReceiptContext;
  /** Guardrail findings of the call (guardrails), signed into the receipt. */
  guardrails?: ReceiptGuardrails;
  /** The engine build that served the call (engine builds), signed into the receipt. */
  engine?: ReceiptEngine;
}

export interface Settled {
  receipt: SignedReceipt;
  usageEventId: string;
  /** The balance after the settle; null when it was answered before it committed (write-behind). */
  balanceMicroUsd: number | null;
}
