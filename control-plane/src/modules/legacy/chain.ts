import type { Kysely } from 'kysely';
import { canonicalize, sha256Hex } from '@svc/shared';
import type { DB } from '../../db/schema.ts';

export type LegacyEventType = 'created' | 'checked_in' | 'content_replaced' | 'warning' | 'attested' | 'released' | 'claimed' | 'cancelled';

/** The previous hash of a plan's first event. */
export const GENESIS = `0x${'0'.repeat(64)}`;

export interface ChainedEvent {
  seq: number;
  type: LegacyEventType;
  at: Date;
  canonical: string;
  prev_hash: string;
  hash: string;
}

/**
 * The record an event's hash covers: RFC 8785 canonical JSON of
 * `{v: 1, plan_id, seq, type, at, data, prev_hash}`; its hash is the 0x-hex sha256 of those UTF-8 bytes. Each
 * record names the previous one's hash, so the chain can be checked from the first event on.
 */
export function eventRecord(planId: string, seq: number, type: LegacyEventType, at: Date, data: Record<string, unknown>, prevHash: string): { canonical: string; hash: string } {
  const canonical = canonicalize({ v: 1, plan_id: planId, seq, type, at: at.toISOString(), data, prev_hash: prevHash });
  return { canonical, hash: `0x${sha256Hex(canonical)}` };
}

/**
 * Appends one event to a plan's chain, on `trx`, which must hold the plan's row lock (so seq and head move
 * one at a time). Returns the event; the caller queues its hash for the public anchors once committed.
 */
export async function appendEvent(
  trx: Kysely<DB>,
  plan: { id: string; event_count: number; head_hash: string },
  type: LegacyEventType,
  at: Date,
  data: Record<string, unknown>,
): Promise<ChainedEvent> {
  const seq = plan.event_count;
  const prev = plan.head_hash;
  const { canonical, hash } = eventRecord(plan.id, seq, type, at, data, prev);
  await trx.insertInto('legacy_events').values({ plan_id: plan.id, seq, type, at, canonical, prev_hash: prev, hash }).execute();
  await trx.updateTable('legacy_plans').set({ event_count: seq + 1, head_hash: hash }).where('id', '=', plan.id).execute();
  plan.event_count = seq + 1;
  plan.head_hash = hash;
  return { seq, type, at, canonical, prev_hash: prev, hash };
}

/** Checks a chain read back in order: each record's hash, its seq and its link to the one before. */
export function verifyChain(planId: string, events: Array<{ seq: number; canonical: string; prev_hash: string; hash: string }>): boolean {
  let prev = GENESIS;
  for (const [i, e] of events.entries()) {
    const r = JSON.parse(e.canonical) as { plan_id: string; seq: number; prev_hash: string };
    if (r.plan_id !== planId || r.seq !== i || e.seq !== i || r.prev_hash !== prev || e.prev_hash !== prev) return false;
    if (`0x${sha256Hex(e.canonical)}` !== e.hash) return false;
    prev = e.hash;
  }
  return true;
}
