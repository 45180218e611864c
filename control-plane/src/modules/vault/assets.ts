import { ServiceError, newId } from '@svc/shared';
import { TREE } from '../anchors/service.ts';
import { GENESIS, HASH_RULE, chainEvents } from './chain.ts';
import { assetNotFound, type Role, type VaultCore } from './core.ts';
import { assetView, sealFields, type AssetInput } from './fields.ts';

/** Registration, the caller's assets, detail with the chain, closing, and the public chain and anchor. */
export class AssetsService {
  constructor(private readonly core: VaultCore) {}

  /** Registers an asset: the issuer holds the whole issued amount; `asset_registered` starts the chain. */
  async register(accountId: string, input: AssetInput) {
    const id = newId('vast_');
    const core = this.core;
    const asset = await core.db.transaction().execute(async (trx) => {
      const now = core.d.clock.now();
      const row = await trx
        .insertInto('vault_assets')
        .values({ id, issuer_account_id: accountId, state: 'open', ...sealFields(core, id, input), chain_length: 0, chain_head: GENESIS, created_at: now, closed_at: null })
        .returningAll()
        .executeTakeFirstOrThrow();
      await core.setPosition(trx, id, accountId, input.issued_micro_usd, now);
      const c = core.changeOf(trx, row, ['issuer', 'holder']);
      await c.append('asset_registered', { issuer_account_id: accountId, ...input });
      await core.assertConserved(trx, row);
      return row;
    });
    await core.anchorHead(id);
    return assetView(core, asset, ['issuer', 'holder']);
  }

  /** Every asset the caller has a part in (issuer, holder, active attester), newest first. */
  async list(accountId: string) {
    const db = this.core.db;
    const wallets = await this.core.wallets(accountId);
    const ids = new Set<string>();
    for (const r of await db.selectFrom('vault_assets').select('id').where('issuer_account_id', '=', accountId).execute()) ids.add(r.id);
    for (const r of await db.selectFrom('vault_positions').select('asset_id').where('account_id', '=', accountId).execute()) ids.add(r.asset_id);
    const attesting = await db
      .selectFrom('vault_attesters')
      .select('asset_id')
      .where('revoked_at', 'is', null)
      .where((eb) => (wallets.length ? eb.or([eb('account_id', '=', accountId), eb('wallet', 'in', wallets)]) : eb('account_id', '=', accountId)))
      .execute();
    for (const r of attesting) ids.add(r.asset_id);
    if (ids.size === 0) return { assets: [] };
    const rows = await db.selectFrom('vault_assets').selectAll().where('id', 'in', [...ids]).orderBy('seq', 'desc').execute();
    const out = [];
    for (const a of rows) {
      const roles = await this.core.roles(db, a, accountId, wallets);
      if (roles.length) out.push(assetView(this.core, a, roles));
    }
    return { assets: out };
  }

  /** One asset with its chain; the issuer also reads each event's opened payload. */
  async detail(accountId: string, id: string) {
    const { asset, roles } = await this.core.access(this.core.db, id, accountId, 'party');
    const issuer = roles.includes('issuer');
    const events = (await chainEvents(this.core.db, id)).map(({ payload_sealed, ...e }) => ({
      ...e,
      payload: issuer ? this.core.seal.openJson<Record<string, unknown>>(payload_sealed, `chain:${id}:${e.seq}`) : null,
    }));
    return { ...assetView(this.core, asset, roles), events };
  }

  /** Closes the asset for good: chains `asset_closed` once; transfers are refused from then on. Idempotent. */
  async close(accountId: string, id: string) {
    return this.core.change(id, accountId, 'issuer', async (c) => {
      if (c.asset.state === 'closed') return assetView(this.core, c.asset, c.roles);
      await c.trx.updateTable('vault_assets').set({ state: 'closed', closed_at: c.now }).where('id', '=', id).execute();
      await c.append('asset_closed', { closed_by: accountId });
      return assetView(this.core, { ...c.asset, state: 'closed', closed_at: c.now }, c.roles as Role[]);
    });
  }

  /** The public, content-free chain of an asset id; unknown ids are not found. */
  async publicChain(id: string) {
    const asset = await this.core.asset(this.core.db, id);
    if (!asset) throw assetNotFound();
    const events = (await chainEvents(this.core.db, id)).map(({ payload_sealed: _, ...e }) => e);
    return { object: 'vault_chain' as const, asset_id: id, length: asset.chain_length, head: asset.chain_head, genesis: GENESIS, hash_rule: HASH_RULE, events };
  }

  /** The anchor batch of the chain now: the root over the ordered event hashes and its public anchor. */
  async publicAnchors(id: string) {
    const asset = await this.core.asset(this.core.db, id);
    if (!asset) throw assetNotFound();
    const { hashes, root, anchor } = await this.core.anchorHead(id);
    if (hashes.length === 0) throw new ServiceError('not_found', 'Vault asset not found');
    return {
      object: 'vault_anchor_batch' as const,
      asset_id: id,
      root,
      event_count: hashes.length,
      event_hashes: hashes,
      tree: TREE,
      anchor,
      anchor_document_url: anchor.root ? `${this.core.base}/v1/anchors/${anchor.root}` : null,
    };
  }
}
