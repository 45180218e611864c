import type { Kysely } from 'kysely';
import { canonicalize, sha256Hex0x } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { VaultSeal } from './seal.ts';

/** The previous hash of an asset's first event. */
export const GENESIS = `0x${'0'.repeat(64)}`;

/** How each event's hash is made; the public chain states it so anyone recomputes the chain. */
export const HASH_RULE =
  'hash = 0x sha256 of the RFC 8785 canonical JSON of {asset_id, seq, type, at, payload_sha256, prev_hash} (at as ISO 8601 UTC with milliseconds); ' +
  `prev_hash of seq 1 is ${GENESIS}, of every later event the hash of the one before; payload_sha256 is the sha256 of the sealed payload's ciphertext bytes, so no content can be read or guessed from it.`;

/** Every kind of change an asset's chain records. */
export const EVENT_TYPES = [
  'asset_registered',
  'transfer',
  'claim_settled',
  'claim_cancelled',
  'distribution_recorded',
  'attester_named',
  'attester_revoked',
  'attestation_recorded',
  'nav_recorded',
  'document_added',
  'document_deleted',
  'view_grant_minted',
  'view_grant_revoked',
  'asset_closed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const sha256 = sha256Hex0x;

export interface ChainEvent {
  seq: number;
  type: string;
  at: string;
  payload_sha256: string;
  prev_hash: string;
  hash: string;
}

export function eventHash(assetId: string, e: Omit<ChainEvent, 'hash'>): string {
  return sha256(canonicalize({ asset_id: assetId, seq: e.seq, type: e.type, at: e.at, payload_sha256: e.payload_sha256, prev_hash: e.prev_hash }));
}

/** The chain head an asset row carries; the row must be locked (FOR UPDATE) by the caller's transaction. */
export interface ChainHead {
  id: string;
  chain_length: number;
  chain_head: string;
}

/**
 * Appends one event to the asset's chain and moves its head, in the caller's transaction (which holds the
 * asset row's lock, so events of one asset are appended one at a time). The payload is sealed (bound to the
 * asset and the event's place) and only the sha256 of its ciphertext is chained. `head` is updated in place.
 */
export async function appendEvent(trx: Kysely<DB>, seal: VaultSeal, head: ChainHead, type: EventType, payload: Record<string, unknown>, at: Date): Promise<ChainEvent> {
  const seq = head.chain_length + 1;
  const sealed = seal.json({ type, ...payload }, `chain:${head.id}:${seq}`);
  const e = { seq, type, at: at.toISOString(), payload_sha256: sha256(sealed), prev_hash: head.chain_head };
  const hash = eventHash(head.id, e);
  await trx.insertInto('vault_chain_events').values({ asset_id: head.id, seq, type, at, payload_sha256: e.payload_sha256, prev_hash: e.prev_hash, hash, payload_sealed: sealed }).execute();
  await trx.updateTable('vault_assets').set({ chain_length: seq, chain_head: hash }).where('id', '=', head.id).execute();
  head.chain_length = seq;
  head.chain_head = hash;
  return { ...e, hash };
}

/** The asset's events in order, content-free (with their sealed payloads when `sealed`). */
export async function chainEvents(db: Kysely<DB>, assetId: string): Promise<Array<ChainEvent & { payload_sealed: Uint8Array }>> {
  const rows = await db.selectFrom('vault_chain_events').selectAll().where('asset_id', '=', assetId).orderBy('seq').execute();
  return rows.map((r) => ({ seq: r.seq, type: r.type, at: r.at.toISOString(), payload_sha256: r.payload_sha256, prev_hash: r.prev_hash, hash: r.hash, payload_sealed: r.payload_sealed }));
}

/** Just the event hashes in order (what the anchor root covers). */
export async function eventHashes(db: Kysely<DB>, assetId: string): Promise<string[]> {
  const rows = await db.selectFrom('vault_chain_events').select('hash').where('asset_id', '=', assetId).orderBy('seq').execute();
  return rows.map((r) => r.hash);
}

/** Whether a list of events links up under HASH_RULE from GENESIS (the gateway checks its own chain with it too). */
export function chainHolds(assetId: string, events: ChainEvent[]): boolean {
  let prev = GENESIS;
  for (const [i, e] of events.entries()) {
    if (e.seq !== i + 1 || e.prev_hash !== prev || eventHash(assetId, e) !== e.hash) return false;
    prev = e.hash;
  }
  return true;
}
