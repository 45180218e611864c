import { checksumAddress } from '@svc/shared';
import type { VaultCore } from './core.ts';

/** Activity items the portfolio shows at most. */
export const RECENT_ACTIVITY = 20;

/** The cap table (issuer only) and the caller's portfolio, positions opened for them. */
export class PositionsService {
  constructor(private readonly core: VaultCore) {}

  /** The issuer's cap table: every position, opened, largest first; pending claims and the issue beside it. */
  async holders(accountId: string, assetId: string) {
    const db = this.core.db;
    const { asset } = await this.core.access(db, assetId, accountId, 'issuer');
    return this.capTable(asset.id, this.core.issued(asset));
  }

  /** The cap table of an asset (also what a view key with the `holders` scope reads). */
  async capTable(assetId: string, issued: number) {
    const db = this.core.db;
    const positions = await this.core.positions(db, assetId);
    const holders = [];
    for (const p of positions) {
      const w = (await this.core.d.identity.listWallets(p.account_id))[0];
      holders.push({ account_id: p.account_id, wallet: w ? checksumAddress(w.address) : null, amount_micro_usd: p.amount });
    }
    const total = positions.reduce((s, p) => s + p.amount, 0);
    return { holders, asset_id: assetId, total_micro_usd: total, pending_claims_micro_usd: await this.core.pendingClaims(db, assetId), issued_micro_usd: issued };
  }

  /** The caller's holdings (opened), their pending outgoing claims, and their recent vault activity. */
  async portfolio(accountId: string) {
    const db = this.core.db;
    const rows = await db.selectFrom('vault_positions').select(['asset_id', 'amount_sealed']).where('account_id', '=', accountId).execute();
    const held = rows.map((r) => ({ asset_id: r.asset_id, amount: this.core.seal.openAmount(r.amount_sealed, `position:${r.asset_id}:${accountId}`) })).filter((h) => h.amount > 0);
    const assets = held.length ? await db.selectFrom('vault_assets').selectAll().where('id', 'in', held.map((h) => h.asset_id)).orderBy('seq', 'desc').execute() : [];
    const holdings = assets.map((a) => ({ asset_id: a.id, name: this.core.name(a), state: a.state, amount_micro_usd: held.find((h) => h.asset_id === a.id)!.amount }));
    const pending = await db.selectFrom('vault_claims').select(['id', 'amount_sealed']).where('sender_account_id', '=', accountId).where('state', '=', 'pending').execute();
    return {
      object: 'vault_portfolio' as const,
      account_id: accountId,
      holdings,
      total_micro_usd: holdings.reduce((s, h) => s + h.amount_micro_usd, 0),
      pending_claims_sent_micro_usd: pending.reduce((s, c) => s + this.core.seal.openAmount(c.amount_sealed, `claim:${c.id}:amount`), 0),
      recent_activity: await this.activity(accountId),
    };
  }

  /** The newest transfers the caller sent or received and distributions paid to them, newest first. */
  private async activity(accountId: string) {
    const db = this.core.db;
    const s = this.core.seal;
    const transfers = await db
      .selectFrom('vault_transfers as t')
      .leftJoin('vault_claims as c', 'c.id', 't.claim_id')
      .select(['t.id', 't.asset_id', 't.from_account_id', 't.amount_sealed', 't.created_at', 'c.state as claim_state'])
      .where((eb) => eb.or([eb('t.from_account_id', '=', accountId), eb('t.to_account_id', '=', accountId)]))
      .orderBy('t.seq', 'desc')
      .limit(RECENT_ACTIVITY)
      .execute();
    const paid = await db
      .selectFrom('vault_distribution_allocations as a')
      .innerJoin('vault_distributions as d', 'd.id', 'a.distribution_id')
      .select(['d.id', 'd.asset_id', 'd.created_at', 'a.allocation_sealed'])
      .where('a.account_id', '=', accountId)
      .orderBy('d.seq', 'desc')
      .limit(RECENT_ACTIVITY)
      .execute();
    const items = [
      ...transfers.map((t) => ({
        kind: t.from_account_id === accountId ? ('transfer_sent' as const) : ('transfer_received' as const),
        id: t.id,
        asset_id: t.asset_id,
        amount_micro_usd: s.openAmount(t.amount_sealed, `transfer:${t.id}:amount`),
        status: t.claim_state === null ? 'settled' : `claim_${t.claim_state}`,
        at: t.created_at,
      })),
      ...paid.map((d) => ({
        kind: 'distribution' as const,
        id: d.id,
        asset_id: d.asset_id,
        amount_micro_usd: s.openJson<{ amount_micro_usd: number }>(d.allocation_sealed, `allocation:${d.id}:${accountId}`).amount_micro_usd,
        status: 'recorded',
        at: d.created_at,
      })),
    ];
    items.sort((a, b) => b.at.getTime() - a.at.getTime());
    const names = await this.core.names(db, items.map((i) => i.asset_id));
    return items.slice(0, RECENT_ACTIVITY).map((i) => ({ ...i, asset_name: names.get(i.asset_id)!, at: i.at.toISOString() }));
  }
}
