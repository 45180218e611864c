import type { Selectable } from 'kysely';
import { ServiceError, checksumAddress, invalid, newId } from '@svc/shared';
import type { VaultAttestersTable } from '../../db/schema.ts';
import type { VaultCore } from './core.ts';

export const ATTESTER_ROLES = ['auditor', 'custodian', 'appraiser', 'legal'] as const;
export type AttesterRole = (typeof ATTESTER_ROLES)[number];
type AttesterRow = Selectable<VaultAttestersTable>;

export interface AttesterInput {
  role: AttesterRole;
  account_id?: string | undefined;
  wallet?: string | undefined;
}

/**
 * Attesters: the issuer names an account or a wallet to a role (a wallet named before any account holds it
 * takes the role for whichever account links it). Revoking ends the role; attestations already recorded
 * stand. The issuer reads the whole roster; an attester their own active roles.
 */
export class AttestersService {
  constructor(private readonly core: VaultCore) {}

  async name(accountId: string, assetId: string, input: AttesterInput) {
    const core = this.core;
    if ((input.account_id === undefined) === (input.wallet === undefined)) throw invalid('account_id: name the attester by exactly one of account_id and wallet', input.account_id === undefined ? 'account_id' : 'wallet');
    const wallet = input.wallet?.toLowerCase() ?? null;
    return core.change(assetId, accountId, 'issuer', async (c) => {
      if (input.account_id !== undefined) {
        if (input.account_id === accountId) throw invalid('account_id: the issuer cannot attest its own asset', 'account_id');
        if (!(await core.d.identity.accountExists(c.trx, input.account_id))) throw invalid(`account_id: no account ${input.account_id}`, 'account_id');
      }
      if (wallet && c.wallets!.includes(wallet)) throw invalid("wallet: this is a wallet of the issuer's account; the issuer cannot attest its own asset", 'wallet');
      const dup = await c.trx
        .selectFrom('vault_attesters')
        .select('id')
        .where('asset_id', '=', c.asset.id)
        .where('role', '=', input.role)
        .where('revoked_at', 'is', null)
        .where(input.account_id !== undefined ? 'account_id' : 'wallet', '=', input.account_id ?? wallet!)
        .executeTakeFirst();
      if (dup) throw new ServiceError('conflict', `This attester holds the role ${input.role} on this asset already (${dup.id})`, { reason: 'attester_exists', attester_id: dup.id });
      const id = newId('vatr_');
      await c.append('attester_named', { attester_id: id, role: input.role, account_id: input.account_id ?? null, wallet });
      const row = await c.trx
        .insertInto('vault_attesters')
        .values({ id, asset_id: c.asset.id, role: input.role, account_id: input.account_id ?? null, wallet, created_at: c.now, revoked_at: null })
        .returningAll()
        .executeTakeFirstOrThrow();
      return view(row);
    });
  }

  /** The roster: every row (active and revoked) for the issuer, an attester's own active roles; holders 403. */
  async list(accountId: string, assetId: string) {
    const core = this.core;
    const { asset, roles, wallets } = await core.access(core.db, assetId, accountId, 'party');
    let rows: AttesterRow[];
    if (roles.includes('issuer')) rows = await core.db.selectFrom('vault_attesters').selectAll().where('asset_id', '=', asset.id).orderBy('seq').execute();
    else if (roles.includes('attester')) rows = await core.attesterRows(core.db, asset.id, accountId, wallets);
    else throw new ServiceError('forbidden', 'The roster is the issuer\'s and, for their own roles, the attesters\'', { reason: 'issuer_or_attester_only' });
    return { attesters: rows.map(view), asset_id: asset.id, roles: [...ATTESTER_ROLES] };
  }

  /** Ends a role (`attester_revoked` chained); revoking again changes nothing; recorded attestations stand. */
  async revoke(accountId: string, assetId: string, attesterId: string) {
    return this.core.change(assetId, accountId, 'issuer', async (c) => {
      const row = await c.trx.selectFrom('vault_attesters').selectAll().where('id', '=', attesterId).where('asset_id', '=', c.asset.id).executeTakeFirst();
      if (!row) throw new ServiceError('not_found', 'Attester not found');
      if (row.revoked_at) return view(row);
      await c.append('attester_revoked', { attester_id: row.id, role: row.role });
      return view(await c.trx.updateTable('vault_attesters').set({ revoked_at: c.now }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow());
    });
  }
}

export function view(r: AttesterRow) {
  return {
    id: r.id,
    object: 'vault_attester' as const,
    asset_id: r.asset_id,
    role: r.role,
    account_id: r.account_id,
    wallet: r.wallet ? checksumAddress(r.wallet) : null,
    state: r.revoked_at ? ('revoked' as const) : ('active' as const),
    created_at: r.created_at.toISOString(),
    revoked_at: r.revoked_at ? r.revoked_at.toISOString() : null,
  };
}
