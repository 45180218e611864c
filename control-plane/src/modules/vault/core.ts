import type { Kysely, Selectable } from 'kysely';
import { ServiceError, notFound, type Clock } from '@svc/shared';
import type { DB, VaultAssetsTable } from '../../db/schema.ts';
import type { Anchors } from '../anchors/service.ts';
import { merkleRoot } from '../anchors/merkle.ts';
import type { IdentityService } from '../identity/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { appendEvent, eventHashes, type ChainEvent, type EventType } from './chain.ts';
import { VaultSeal } from './seal.ts';

export interface VaultDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  sealKey: Uint8Array;
  anchors: Anchors;
  identity: IdentityService;
  publicUrl: URL;
}

export type AssetRow = Selectable<VaultAssetsTable>;
export type Role = 'issuer' | 'holder' | 'attester';
/** What a route needs of the caller: any part in the asset, a position in it, or to be its issuer. */
export type Need = 'party' | 'holder' | 'issuer';

/** The anchor kind of a vault chain's root (the leaf is the root over the chain's event hashes). */
export const ANCHOR_KIND = 'vault_chain';
/** The largest amount in micro-USD the vault takes (every sum of positions stays a safe integer). */
export const MAX_AMOUNT = Number.MAX_SAFE_INTEGER;

export const assetNotFound = () => notFound('Vault asset');

export interface Change {
  trx: Kysely<DB>;
  /** The caller's linked wallets, lower-case (read before the transaction). */
  wallets?: string[];
  asset: AssetRow;
  roles: Role[];
  now: Date;
  append(type: EventType, payload: Record<string, unknown>): Promise<ChainEvent>;
}

/**
 * What every part of the vault shares: sealing, who the caller is to an asset, positions, and `change`,
 * the one way anything about an asset is changed (the asset row locked, access checked under the lock, the
 * work and its chain event in one transaction, the new chain root queued for anchoring after commit).
 *
 * Who learns what on refusal: a caller with no part in an asset (not its issuer, holding nothing, no
 * active attester role) gets 404 as for an asset that does not exist; a holder or attester calling an
 * issuer-only route gets 403, since they know the asset already. A former holder (a position at zero)
 * may still send, and is refused as sending more than their position.
 */
export class VaultCore {
  readonly seal: VaultSeal;
  readonly base: string;

  constructor(readonly d: VaultDeps) {
    this.seal = new VaultSeal(d.sealKey);
    this.base = d.publicUrl.href.replace(/\/+$/, '');
  }

  get db(): Kysely<DB> {
    return this.d.db;
  }

  async asset(db: Kysely<DB>, id: string, lock = false): Promise<AssetRow | undefined> {
    let q = db.selectFrom('vault_assets').selectAll().where('id', '=', id);
    if (lock) q = q.forUpdate();
    return q.executeTakeFirst();
  }

  issued(a: AssetRow): number {
    return this.seal.openAmount(a.issued_sealed, `asset:${a.id}:issued`);
  }

  name(a: AssetRow): string {
    return this.seal.openText(a.name_sealed, `asset:${a.id}:name`);
  }

  /** Asset names by id (opened), for lists that name the asset of each row. */
  async names(db: Kysely<DB>, ids: string[]): Promise<Map<string, string>> {
    const uniq = [...new Set(ids)];
    if (!uniq.length) return new Map();
    const assets = await db.selectFrom('vault_assets').selectAll().where('id', 'in', uniq).execute();
    return new Map(assets.map((a) => [a.id, this.name(a)]));
  }

  /** The account's position in the asset (0 without one); `lock` holds the row for the transaction. */
  async position(db: Kysely<DB>, assetId: string, accountId: string, lock = false): Promise<number> {
    let q = db.selectFrom('vault_positions').select('amount_sealed').where('asset_id', '=', assetId).where('account_id', '=', accountId);
    if (lock) q = q.forUpdate();
    const row = await q.executeTakeFirst();
    return row ? this.seal.openAmount(row.amount_sealed, `position:${assetId}:${accountId}`) : 0;
  }

  /** Whether the account ever held a position in the asset (a row, even at zero). */
  async hasPosition(db: Kysely<DB>, assetId: string, accountId: string): Promise<boolean> {
    return (await db.selectFrom('vault_positions').select('account_id').where('asset_id', '=', assetId).where('account_id', '=', accountId).executeTakeFirst()) !== undefined;
  }

  async setPosition(db: Kysely<DB>, assetId: string, accountId: string, amount: number, at: Date): Promise<void> {
    const amount_sealed = this.seal.amount(amount, `position:${assetId}:${accountId}`);
    await db
      .insertInto('vault_positions')
      .values({ asset_id: assetId, account_id: accountId, amount_sealed, updated_at: at })
      .onConflict((oc) => oc.columns(['asset_id', 'account_id']).doUpdateSet({ amount_sealed, updated_at: at }))
      .execute();
  }

  /** Every position of the asset, opened, largest first (zero positions left out). */
  async positions(db: Kysely<DB>, assetId: string): Promise<Array<{ account_id: string; amount: number }>> {
    const rows = await db.selectFrom('vault_positions').select(['account_id', 'amount_sealed']).where('asset_id', '=', assetId).execute();
    return rows
      .map((r) => ({ account_id: r.account_id, amount: this.seal.openAmount(r.amount_sealed, `position:${assetId}:${r.account_id}`) }))
      .filter((p) => p.amount > 0)
      .sort((a, b) => b.amount - a.amount || (a.account_id < b.account_id ? -1 : 1));
  }

  /** The sum of the asset's pending claims (value sent to wallets without an account, not yet settled). */
  async pendingClaims(db: Kysely<DB>, assetId: string): Promise<number> {
    const rows = await db.selectFrom('vault_claims').select(['id', 'amount_sealed']).where('asset_id', '=', assetId).where('state', '=', 'pending').execute();
    return rows.reduce((s, r) => s + this.seal.openAmount(r.amount_sealed, `claim:${r.id}:amount`), 0);
  }

  /**
   * The invariant every change of positions keeps, checked in its own transaction before it commits:
   * positions plus pending claims equal the issued amount. A breach is a bug; the transaction is rolled back.
   */
  async assertConserved(db: Kysely<DB>, asset: AssetRow): Promise<void> {
    const held = (await this.positions(db, asset.id)).reduce((s, p) => s + p.amount, 0);
    const pending = await this.pendingClaims(db, asset.id);
    const issued = this.issued(asset);
    if (held + pending !== issued) throw new Error(`vault: asset ${asset.id} would hold ${held} + ${pending} pending against ${issued} issued`);
  }

  /** The account's linked wallets, lower-case. */
  async wallets(accountId: string): Promise<string[]> {
    return (await this.d.identity.listWallets(accountId)).map((w) => w.address.toLowerCase());
  }

  /**
   * The active attester rows of the asset naming this account or one of its wallets (`wallets`, read
   * before any transaction: the identity module reads them on its own connection).
   */
  async attesterRows(db: Kysely<DB>, assetId: string, accountId: string, wallets: string[]) {
    return db
      .selectFrom('vault_attesters')
      .selectAll()
      .where('asset_id', '=', assetId)
      .where('revoked_at', 'is', null)
      .where((eb) => (wallets.length ? eb.or([eb('account_id', '=', accountId), eb('wallet', 'in', wallets)]) : eb('account_id', '=', accountId)))
      .orderBy('seq')
      .execute();
  }

  async roles(db: Kysely<DB>, asset: AssetRow, accountId: string, wallets: string[]): Promise<Role[]> {
    const roles: Role[] = [];
    if (asset.issuer_account_id === accountId) roles.push('issuer');
    if ((await this.position(db, asset.id, accountId)) > 0) roles.push('holder');
    if ((await this.attesterRows(db, asset.id, accountId, wallets)).length > 0) roles.push('attester');
    return roles;
  }

  /** The asset and the caller's roles in it, refused as the class comment says. */
  async access(db: Kysely<DB>, assetId: string, accountId: string, need: Need, lock = false, wallets?: string[]): Promise<{ asset: AssetRow; roles: Role[]; wallets: string[] }> {
    const w = wallets ?? (await this.wallets(accountId));
    const asset = await this.asset(db, assetId, lock);
    if (!asset) throw assetNotFound();
    const roles = await this.roles(db, asset, accountId, w);
    // A holder whose position ran out (a transfer racing theirs took the rest) still sends: refused as more than the position.
    if (need === 'holder' && !roles.includes('holder') && (await this.hasPosition(db, asset.id, accountId))) return { asset, roles, wallets: w };
    if (roles.length === 0) throw assetNotFound();
    if (need === 'issuer' && !roles.includes('issuer')) {
      throw new ServiceError('forbidden', 'Only the issuer of this asset may do this', { reason: 'issuer_only' });
    }
    if (need === 'holder' && !roles.includes('holder')) {
      throw new ServiceError('forbidden', 'You hold no position in this asset', { reason: 'no_position' });
    }
    return { asset, roles, wallets: w };
  }

  /** A change of the asset, as the class comment says. */
  async change<T>(assetId: string, accountId: string, need: Need, work: (c: Change) => Promise<T>): Promise<T> {
    let moved = false;
    const wallets = await this.wallets(accountId);
    const out = await this.d.db.transaction().execute(async (trx) => {
      const { asset, roles } = await this.access(trx, assetId, accountId, need, true, wallets);
      return work({ ...this.changeOf(trx, asset, roles, () => (moved = true)), wallets });
    });
    if (moved) await this.anchorHead(assetId);
    return out;
  }

  /** A change on an asset row the caller locked itself (claims settled by token, a new asset). */
  changeOf(trx: Kysely<DB>, asset: AssetRow, roles: Role[], onAppend: () => void = () => undefined): Change {
    const now = this.d.clock.now();
    return {
      trx,
      asset,
      roles,
      now,
      append: (type, payload) => {
        onAppend();
        return appendEvent(trx, this.seal, asset, type, payload, now);
      },
    };
  }

  /** The root over the asset's event hashes now; queues it for the public anchors (once per root). */
  async anchorHead(assetId: string) {
    const hashes = await eventHashes(this.d.db, assetId);
    const root = rootOf(hashes);
    return { hashes, root, anchor: await this.d.anchors.track(ANCHOR_KIND, `${assetId}:${hashes.length}`, root) };
  }

  refuseClosed(asset: AssetRow, what: string): void {
    if (asset.state === 'closed') {
      throw new ServiceError('conflict', `This asset is closed (${asset.closed_at!.toISOString()}): ${what} are refused`, { reason: 'asset_closed' });
    }
  }
}

/** RFC 6962 root over the event hashes, in order (the anchors module's tree). */
export function rootOf(hashes: string[]): string {
  return `0x${merkleRoot(hashes.map((h) => Buffer.from(h.slice(2), 'hex'))).toString('hex')}`;
}
