import type { Kysely } from 'kysely';
import { ServiceError, newId, type Clock, type ReceiptContext } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { ROOT_ALGORITHM, orderMembers, orderedRoot, type Member } from './root.ts';
import { insertSet, listSets, liveRoot, liveSet, membersOf, takeDown, type SetFields } from './store.ts';

/** Set ids: `srcset_` and 24 base36 characters. */
export const SET_PREFIX = 'srcset_';
/** GET /v1/sources/sets answers one page: the newest this many live sets. */
export const LIST_CAP = 200;
/** The request header by which an inference call cites one of the caller's sets. */
export const SOURCE_SET_HEADER = 'x-svc-source-set';

/** The same answer for a set that does not exist, was taken down, or is another account's. */
const setNotFound = (param?: string) => new ServiceError('not_found', 'Source set not found', param ? { param } : {});

/** The root the members recompute to now, or null when they no longer make a set (nothing, or a damaged row). */
function recompute(members: readonly Member[]): string | null {
  try {
    return orderedRoot(members);
  } catch {
    return null;
  }
}

const memberView = (m: Member) => ({ label: m.label, sha256: m.sha256, byte_len: m.byte_len });

/**
 * Source sets: an account registers the fingerprints (label, sha256, byte_len) of the sources it draws on;
 * the set gets an ordered root (root.ts) that anyone recomputes from the public members, and inference calls
 * that cite the set carry the root in their signed receipt. Owns source_sets and source_set_members.
 */
export class SourcesService {
  private readonly base: string;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    publicUrl: URL,
  ) {
    this.base = publicUrl.href.replace(/\/+$/, '');
  }

  private summary(s: SetFields) {
    return {
      id: s.id,
      object: 'source_set' as const,
      root: s.root,
      root_algorithm: ROOT_ALGORITHM,
      member_count: s.member_count,
      created_at: s.created_at.toISOString(),
      public_url: `${this.base}/v1/sources/public/${encodeURIComponent(s.id)}`,
    };
  }

  private detail(s: SetFields, members: readonly Member[]) {
    return { ...this.summary(s), root_recomputes: recompute(members) === s.root, members: members.map(memberView) };
  }

  /**
   * Registers a set. `members` passed the route's checks (labels unique, digests 64 hex, byte_len a
   * non-negative integer, 1 to MAX_MEMBERS); digests are stored in lowercase.
   */
  async register(accountId: string, members: readonly Member[]) {
    const ordered = orderMembers(members.map((m) => ({ label: m.label, sha256: m.sha256.toLowerCase(), byte_len: m.byte_len })));
    const set = { id: newId(SET_PREFIX), account_id: accountId, root: orderedRoot(ordered), member_count: ordered.length, created_at: this.clock.now() };
    await this.db.transaction().execute((trx) => insertSet(trx, set, ordered));
    return this.detail({ ...set, deleted_at: null }, ordered);
  }

  /** The account's live sets, newest first (at most LIST_CAP), without their members. */
  async list(accountId: string) {
    return { sets: (await listSets(this.db, accountId, LIST_CAP)).map((s) => this.summary(s)) };
  }

  async get(accountId: string, id: string) {
    const s = await liveSet(this.db, id, accountId);
    if (!s) throw setNotFound();
    return this.detail(s, await membersOf(this.db, id));
  }

  /** Takes the set down: members deleted, the content-free row kept. Receipts that cite its root are not touched. */
  async takeDown(accountId: string, id: string) {
    const s = await this.db.transaction().execute((trx) => takeDown(trx, id, accountId, this.clock.now()));
    if (!s) throw setNotFound();
    return { id: s.id, object: 'source_set' as const, root: s.root, deleted: true as const, deleted_at: s.deleted_at!.toISOString() };
  }

  /** The public proof: the stored members, the stored root, and whether the one recomputes to the other now. */
  async publicProof(id: string) {
    const s = await liveSet(this.db, id);
    if (!s) throw setNotFound();
    const members = await membersOf(this.db, id);
    const recomputed = recompute(members);
    return {
      id: s.id,
      object: 'source_set_proof' as const,
      root: s.root,
      root_algorithm: ROOT_ALGORITHM,
      root_recomputes: recomputed === s.root,
      recomputed_root: recomputed,
      member_count: s.member_count,
      members: members.map(memberView),
      created_at: s.created_at.toISOString(),
    };
  }

  /**
   * What the receipt of an inference call citing set `id` carries: one primary-key read. Another account's,
   * a taken-down or an unknown set answers the same 404, naming the header.
   */
  async citation(accountId: string, id: string): Promise<ReceiptContext> {
    const root = await liveRoot(this.db, id, accountId);
    if (root === undefined) throw setNotFound(SOURCE_SET_HEADER);
    return { root, source_set_id: id };
  }
}
