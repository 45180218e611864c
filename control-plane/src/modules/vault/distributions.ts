import { ServiceError, newId } from '@svc/shared';
import type { VaultCore } from './core.ts';

/** Distributions listed at most (newest first). */
export const DISTRIBUTIONS_CAP = 200;

export const ROUNDING =
  'Each holder is allocated floor(amount × position ÷ basis) micro-USD, basis being the sum of positions at the time (pending claims ' +
  'hold no position and take no part). The remainder, amount minus the sum of the allocations (less than the number of holders), ' +
  'is stated and allocated to no one: it stays with the issuer.';

interface Details {
  amount_micro_usd: number;
  basis_micro_usd: number;
  allocated_micro_usd: number;
  remainder_micro_usd: number;
  holder_count: number;
  memo: string | null;
}
interface Allocation {
  position_micro_usd: number;
  amount_micro_usd: number;
}

/**
 * Distributions: the issuer records a pro-rata payout over the positions of the moment. It moves no
 * principal (positions are untouched: the cap table before and after is the same) and pays nothing out
 * itself: it is the signed-off record of who is owed what. Allowed on a closed asset too (a final payout).
 */
export class DistributionsService {
  constructor(private readonly core: VaultCore) {}

  async distribute(accountId: string, assetId: string, input: { amount_micro_usd: number; memo?: string | undefined }) {
    const core = this.core;
    return core.change(assetId, accountId, 'issuer', async (c) => {
      const positions = await core.positions(c.trx, c.asset.id);
      const basis = positions.reduce((s, p) => s + p.amount, 0);
      if (basis === 0) throw new ServiceError('conflict', 'No account holds a position in this asset (everything is in pending claims): nothing to distribute over', { reason: 'no_positions' });
      const amount = BigInt(input.amount_micro_usd);
      const allocations = positions.map((p) => ({ account_id: p.account_id, position_micro_usd: p.amount, amount_micro_usd: Number((amount * BigInt(p.amount)) / BigInt(basis)) }));
      const allocated = allocations.reduce((s, a) => s + a.amount_micro_usd, 0);
      const details: Details = {
        amount_micro_usd: input.amount_micro_usd,
        basis_micro_usd: basis,
        allocated_micro_usd: allocated,
        remainder_micro_usd: input.amount_micro_usd - allocated,
        holder_count: positions.length,
        memo: input.memo ?? null,
      };
      const id = newId('vdst_');
      const ev = await c.append('distribution_recorded', { distribution_id: id, ...details, allocations });
      const row = await c.trx
        .insertInto('vault_distributions')
        .values({ id, asset_id: c.asset.id, details_sealed: core.seal.json(details, `distribution:${id}:details`), chain_seq: ev.seq, created_at: c.now })
        .returningAll()
        .executeTakeFirstOrThrow();
      await c.trx
        .insertInto('vault_distribution_allocations')
        .values(allocations.map((a) => ({ distribution_id: id, account_id: a.account_id, allocation_sealed: core.seal.json({ position_micro_usd: a.position_micro_usd, amount_micro_usd: a.amount_micro_usd }, `allocation:${id}:${a.account_id}`) })))
        .execute();
      await core.assertConserved(c.trx, c.asset);
      return this.view(row, core.name(c.asset), details, allocations, 'issuer');
    });
  }

  /** Distributions of assets the caller issued (every allocation) or was allocated in (their own); newest first. */
  async list(accountId: string, assetId?: string) {
    const db = this.core.db;
    let q = db
      .selectFrom('vault_distributions as d')
      .innerJoin('vault_assets as a', 'a.id', 'd.asset_id')
      .selectAll('d')
      .select('a.issuer_account_id')
      .where((eb) =>
        eb.or([
          eb('a.issuer_account_id', '=', accountId),
          eb('d.id', 'in', eb.selectFrom('vault_distribution_allocations').select('distribution_id').where('account_id', '=', accountId)),
        ]),
      );
    if (assetId) q = q.where('d.asset_id', '=', assetId);
    const rows = await q.orderBy('d.seq', 'desc').limit(DISTRIBUTIONS_CAP).execute();
    const names = await this.core.names(db, rows.map((r) => r.asset_id));
    const out = [];
    for (const r of rows) {
      const issuer = r.issuer_account_id === accountId;
      const details = this.core.seal.openJson<Details>(r.details_sealed, `distribution:${r.id}:details`);
      let allocs = db.selectFrom('vault_distribution_allocations').selectAll().where('distribution_id', '=', r.id);
      if (!issuer) allocs = allocs.where('account_id', '=', accountId);
      const allocations = (await allocs.execute())
        .map((x) => ({ account_id: x.account_id, ...this.core.seal.openJson<Allocation>(x.allocation_sealed, `allocation:${r.id}:${x.account_id}`) }))
        .sort((x, y) => y.position_micro_usd - x.position_micro_usd || (x.account_id < y.account_id ? -1 : 1));
      out.push(this.view(r, names.get(r.asset_id)!, details, allocations, issuer ? 'issuer' : 'holder'));
    }
    return { distributions: out };
  }

  /** The issuer reads the whole record; a holder the amount, the rule and their own allocation only. */
  private view(r: { id: string; asset_id: string; chain_seq: number; created_at: Date }, name: string, d: Details, allocations: Array<Allocation & { account_id: string }>, as: 'issuer' | 'holder') {
    const issuer = as === 'issuer';
    return {
      id: r.id,
      object: 'vault_distribution' as const,
      asset_id: r.asset_id,
      asset_name: name,
      seen_as: as,
      amount_micro_usd: d.amount_micro_usd,
      basis_micro_usd: issuer ? d.basis_micro_usd : null,
      allocated_micro_usd: issuer ? d.allocated_micro_usd : null,
      remainder_micro_usd: issuer ? d.remainder_micro_usd : null,
      holder_count: issuer ? d.holder_count : null,
      rounding: ROUNDING,
      memo: d.memo,
      allocations,
      chain_seq: r.chain_seq,
      created_at: r.created_at.toISOString(),
    };
  }
}
