import type { Kysely, Selectable } from 'kysely';
import { ServiceError, checksumAddress, notFound, sha256Hex } from '@svc/shared';
import type { DB, VaultClaimsTable } from '../../db/schema.ts';
import type { VaultCore } from './core.ts';

type ClaimRow = Selectable<VaultClaimsTable>;

/** Unknown, malformed and cancelled claim tokens all answer this. */
const claimLinkNotFound = () => notFound('Vault claim');

/**
 * Claims: a transfer to a wallet no account holds waits as a claim (its amount still counts in the issue,
 * under pending claims). The sender lists and may cancel it (refund); the public link names the asset and
 * the bound wallet, never the amount; a session whose account holds that wallet settles it into a position.
 * Settling and cancelling lock the asset row and the claim row, so a claim is settled or cancelled once.
 * Both work on a closed asset too: they finish or undo a transfer made while it was open.
 */
export class ClaimsService {
  constructor(private readonly core: VaultCore) {}

  /** Claims the caller sent, amounts opened, newest first (complete). */
  async list(accountId: string) {
    const db = this.core.db;
    const rows = await db.selectFrom('vault_claims').selectAll().where('sender_account_id', '=', accountId).orderBy('seq', 'desc').execute();
    const names = await this.core.names(db, rows.map((r) => r.asset_id));
    return { claims: rows.map((r) => this.view(r, names.get(r.asset_id)!)) };
  }

  /** The sender refunds a pending claim to their position; cancelling again is a no-op; a settled claim is 409. */
  async cancel(accountId: string, id: string) {
    const core = this.core;
    const found = await core.db.selectFrom('vault_claims').select(['asset_id']).where('id', '=', id).where('sender_account_id', '=', accountId).executeTakeFirst();
    if (!found) throw notFound('Vault claim');
    let moved = false;
    const view = await core.db.transaction().execute(async (trx) => {
      const asset = (await core.asset(trx, found.asset_id, true))!;
      const claim = await this.locked(trx, id);
      if (claim.state === 'cancelled') return this.view(claim, core.name(asset));
      if (claim.state === 'settled') throw new ServiceError('conflict', 'This claim was settled already; it can no longer be cancelled', { reason: 'claim_settled' });
      const c = core.changeOf(trx, asset, ['holder'], () => (moved = true));
      const amount = this.amount(claim);
      await core.setPosition(trx, asset.id, accountId, (await core.position(trx, asset.id, accountId, true)) + amount, c.now);
      const row = await trx.updateTable('vault_claims').set({ state: 'cancelled', cancelled_at: c.now }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
      await c.append('claim_cancelled', { claim_id: id, transfer_id: claim.transfer_id, refunded_account_id: accountId, amount_micro_usd: amount });
      await core.assertConserved(trx, asset);
      return this.view(row, core.name(asset));
    });
    if (moved) await core.anchorHead(found.asset_id);
    return view;
  }

  /** The public claim link: asset name, bound wallet and state; never the amount. */
  async link(token: string) {
    const claim = await this.byToken(this.core.db, token);
    const asset = (await this.core.asset(this.core.db, claim.asset_id))!;
    return {
      object: 'vault_claim_link' as const,
      asset_name: this.core.name(asset),
      wallet: checksumAddress(claim.wallet),
      state: claim.state as 'pending' | 'settled',
      created_at: claim.created_at.toISOString(),
      settle: `POST /v1/vault/claim/{token} with a session whose account holds ${checksumAddress(claim.wallet)} (sign in with that wallet, or link it)`,
    };
  }

  /**
   * Settles a claim into the caller's position: the caller's account must hold the bound wallet (403
   * otherwise, nothing written). Settling again by the same account answers the settled claim.
   */
  async settle(accountId: string, token: string) {
    const core = this.core;
    const found = await this.byToken(core.db, token);
    const wallets = await core.wallets(accountId);
    if (!wallets.includes(found.wallet)) {
      throw new ServiceError('forbidden', `token: this claim is bound to the wallet ${checksumAddress(found.wallet)}, which your account does not hold; sign in with it or link it (POST /v1/auth/wallets)`, {
        param: 'token',
        reason: 'wrong_wallet',
      });
    }
    let moved = false;
    const out = await core.db.transaction().execute(async (trx) => {
      const asset = (await core.asset(trx, found.asset_id, true))!;
      const claim = await this.locked(trx, found.id);
      if (claim.state === 'cancelled') throw claimLinkNotFound();
      if (claim.state === 'settled') {
        if (claim.settled_account_id === accountId) return { claim, asset };
        throw new ServiceError('conflict', 'This claim was settled already', { reason: 'claim_settled' });
      }
      const c = core.changeOf(trx, asset, ['holder'], () => (moved = true));
      const amount = this.amount(claim);
      await core.setPosition(trx, asset.id, accountId, (await core.position(trx, asset.id, accountId, true)) + amount, c.now);
      const row = await trx.updateTable('vault_claims').set({ state: 'settled', settled_at: c.now, settled_account_id: accountId }).where('id', '=', claim.id).returningAll().executeTakeFirstOrThrow();
      await trx.updateTable('vault_transfers').set({ to_account_id: accountId }).where('id', '=', claim.transfer_id).execute();
      await c.append('claim_settled', { claim_id: claim.id, transfer_id: claim.transfer_id, account_id: accountId, amount_micro_usd: amount });
      await core.assertConserved(trx, asset);
      return { claim: row, asset };
    });
    if (moved) await core.anchorHead(found.asset_id);
    return { ...this.view(out.claim, core.name(out.asset)), position_micro_usd: await core.position(core.db, out.asset.id, accountId) };
  }

  private async byToken(db: Kysely<DB>, token: string): Promise<ClaimRow> {
    const row = await db.selectFrom('vault_claims').selectAll().where('token_hash', '=', sha256Hex(token)).executeTakeFirst();
    if (!row || row.state === 'cancelled') throw claimLinkNotFound();
    return row;
  }

  private async locked(trx: Kysely<DB>, id: string): Promise<ClaimRow> {
    return trx.selectFrom('vault_claims').selectAll().where('id', '=', id).forUpdate().executeTakeFirstOrThrow();
  }

  private amount(r: ClaimRow): number {
    return this.core.seal.openAmount(r.amount_sealed, `claim:${r.id}:amount`);
  }


  view(r: ClaimRow, assetName: string) {
    return {
      id: r.id,
      object: 'vault_claim' as const,
      asset_id: r.asset_id,
      asset_name: assetName,
      transfer_id: r.transfer_id,
      wallet: checksumAddress(r.wallet),
      amount_micro_usd: this.amount(r),
      state: r.state,
      created_at: r.created_at.toISOString(),
      settled_at: r.settled_at ? r.settled_at.toISOString() : null,
      settled_account_id: r.settled_account_id,
      cancelled_at: r.cancelled_at ? r.cancelled_at.toISOString() : null,
    };
  }
}
