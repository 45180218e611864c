import type { Kysely, Selectable } from 'kysely';
import { ServiceError, checksumAddress, invalid, newId, newSecret, sha256Hex } from '@svc/shared';
import type { DB, VaultClaimsTable, VaultTransfersTable } from '../../db/schema.ts';
import type { VaultCore } from './core.ts';

/** Transfers listed at most (newest first). */
export const TRANSFERS_CAP = 100;
export const CLAIM_TOKEN_PREFIX = 'vclaim-svc_';

export interface TransferInput {
  asset_id: string;
  to_wallet: string;
  amount_micro_usd: number;
  memo?: string | undefined;
}

type TransferRow = Selectable<VaultTransfersTable>;
type ClaimState = Selectable<VaultClaimsTable>['state'];

/**
 * Private position transfers: from the caller's position to another account's wallet, value-conserving.
 * The asset row is locked for the whole transfer (so transfers of one asset run one at a time and a
 * position is never overdrawn), the sum of positions and pending claims is checked against the issue
 * before commit. A wallet linked to no account receives a claim instead (claims.ts).
 */
export class TransfersService {
  constructor(private readonly core: VaultCore) {}

  async transfer(accountId: string, input: TransferInput) {
    const core = this.core;
    const to = input.to_wallet.toLowerCase();
    let token: string | null = null;
    const out = await core.change(input.asset_id, accountId, 'holder', async (c) => {
      if (c.wallets!.includes(to)) throw invalid('to_wallet: this is a wallet of your own account; a transfer goes to another account', 'to_wallet');
      core.refuseClosed(c.asset, 'transfers');
      const have = await core.position(c.trx, c.asset.id, accountId, true);
      if (input.amount_micro_usd > have) {
        throw new ServiceError('conflict', `amount_micro_usd: ${input.amount_micro_usd} is more than your position in this asset (${have})`, {
          param: 'amount_micro_usd',
          reason: 'insufficient_position',
          available_micro_usd: have,
        });
      }
      const toAccount = await core.d.identity.accountOfWallet(c.trx, to);
      const id = newId('vtr_');
      const claimId = toAccount ? null : newId('vclm_');
      await core.setPosition(c.trx, c.asset.id, accountId, have - input.amount_micro_usd, c.now);
      if (toAccount) {
        const theirs = await core.position(c.trx, c.asset.id, toAccount, true);
        await core.setPosition(c.trx, c.asset.id, toAccount, theirs + input.amount_micro_usd, c.now);
      }
      const ev = await c.append('transfer', { transfer_id: id, from_account_id: accountId, to_wallet: to, to_account_id: toAccount, amount_micro_usd: input.amount_micro_usd, claim_id: claimId, memo: input.memo ?? null });
      const row = await c.trx
        .insertInto('vault_transfers')
        .values({
          id,
          asset_id: c.asset.id,
          from_account_id: accountId,
          to_wallet: to,
          to_account_id: toAccount,
          claim_id: claimId,
          amount_sealed: core.seal.amount(input.amount_micro_usd, `transfer:${id}:amount`),
          memo_sealed: core.seal.optional(input.memo, `transfer:${id}:memo`),
          chain_seq: ev.seq,
          created_at: c.now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (claimId) {
        token = newSecret(CLAIM_TOKEN_PREFIX);
        await c.trx
          .insertInto('vault_claims')
          .values({
            id: claimId,
            asset_id: c.asset.id,
            transfer_id: id,
            sender_account_id: accountId,
            wallet: to,
            amount_sealed: core.seal.amount(input.amount_micro_usd, `claim:${claimId}:amount`),
            token_hash: sha256Hex(token),
            state: 'pending',
            created_at: c.now,
            settled_at: null,
            settled_account_id: null,
            cancelled_at: null,
          })
          .execute();
      }
      await core.assertConserved(c.trx, c.asset);
      return { row, name: core.name(c.asset) };
    });
    const view = this.view(out.row, out.name, out.row.claim_id ? 'pending' : null);
    if (!token) return { ...view, claim: null };
    return { ...view, claim: { id: out.row.claim_id!, state: 'pending' as const, token, claim_url: `${core.base}/v1/vault/claims/${token}`, settle_url: `${core.base}/v1/vault/claim/${token}` } };
  }

  /** Transfers the caller sent or received, and every transfer of the assets they issued; newest first. */
  async list(accountId: string, assetId?: string) {
    const db = this.core.db;
    let q = db
      .selectFrom('vault_transfers as t')
      .leftJoin('vault_claims as c', 'c.id', 't.claim_id')
      .selectAll('t')
      .select('c.state as claim_state')
      .where((eb) =>
        eb.or([
          eb('t.from_account_id', '=', accountId),
          eb('t.to_account_id', '=', accountId),
          eb('t.asset_id', 'in', eb.selectFrom('vault_assets').select('id').where('issuer_account_id', '=', accountId)),
        ]),
      );
    if (assetId) q = q.where('t.asset_id', '=', assetId);
    const rows = await q.orderBy('t.seq', 'desc').limit(TRANSFERS_CAP).execute();
    const names = await this.core.names(db, [...new Set(rows.map((r) => r.asset_id))]);
    return { transfers: rows.map((r) => this.view(r, names.get(r.asset_id)!, r.claim_state)) };
  }


  view(r: TransferRow, assetName: string, claim: ClaimState | null) {
    const s = this.core.seal;
    return {
      id: r.id,
      object: 'vault_transfer' as const,
      asset_id: r.asset_id,
      asset_name: assetName,
      from_account_id: r.from_account_id,
      to_wallet: checksumAddress(r.to_wallet),
      to_account_id: r.to_account_id,
      amount_micro_usd: s.openAmount(r.amount_sealed, `transfer:${r.id}:amount`),
      memo: s.openOptional(r.memo_sealed, `transfer:${r.id}:memo`),
      status: claim === null ? ('settled' as const) : (`claim_${claim}` as const),
      claim_id: r.claim_id,
      chain_seq: r.chain_seq,
      created_at: r.created_at.toISOString(),
    };
  }
}
