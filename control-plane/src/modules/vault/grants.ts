import type { Selectable } from 'kysely';
import { ServiceError, newId, newSecret, notFound, sha256Hex } from '@svc/shared';
import type { VaultViewGrantsTable } from '../../db/schema.ts';
import { assetNotFound, type VaultCore } from './core.ts';
import { documentContent, documentMeta } from './documents.ts';
import { assetView } from './fields.ts';
import type { PositionsService } from './positions.ts';

export const VIEW_SCOPES = ['summary', 'holders', 'documents'] as const;
export type ViewScope = (typeof VIEW_SCOPES)[number];
export const VIEW_TOKEN_PREFIX = 'vview-svc_';
export const DEFAULT_VIEW_TTL_SECONDS = 7 * 86_400;
export const MAX_VIEW_TTL_SECONDS = 365 * 86_400;

type GrantRow = Selectable<VaultViewGrantsTable>;

/** Unknown, revoked and expired view keys all answer this. */
const viewNotFound = () => notFound('View key');

/**
 * View grants: the issuer mints a scoped, expiring view key (the token shown once, stored as sha256) for
 * someone outside the vault (an auditor, a regulator, a prospective buyer); anyone holding the token reads
 * exactly its scopes: `summary` (the asset's fields and state), `holders` (the cap table), `documents`
 * (every stored document, listed and fetched). Minting and revoking are chained; reads are not.
 */
export class GrantsService {
  constructor(
    private readonly core: VaultCore,
    private readonly positions: PositionsService,
  ) {}

  async mint(accountId: string, assetId: string, input: { scopes: ViewScope[]; ttl_seconds?: number | undefined; label?: string | undefined }) {
    const core = this.core;
    const scopes = VIEW_SCOPES.filter((s) => input.scopes.includes(s));
    const token = newSecret(VIEW_TOKEN_PREFIX);
    const row = await core.change(assetId, accountId, 'issuer', async (c) => {
      const id = newId('vgr_');
      const expires = new Date(c.now.getTime() + (input.ttl_seconds ?? DEFAULT_VIEW_TTL_SECONDS) * 1000);
      await c.append('view_grant_minted', { grant_id: id, scopes, expires_at: expires.toISOString(), label: input.label ?? null });
      return c.trx
        .insertInto('vault_view_grants')
        .values({ id, asset_id: c.asset.id, token_hash: sha256Hex(token), scopes: JSON.stringify(scopes), label_sealed: core.seal.optional(input.label, `grant:${id}:label`), expires_at: expires, created_at: c.now, revoked_at: null })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return { ...this.view(row), token, view_url: `${core.base}/v1/vault/view/${token}` };
  }

  async list(accountId: string, assetId: string) {
    const { asset } = await this.core.access(this.core.db, assetId, accountId, 'issuer');
    const rows = await this.core.db.selectFrom('vault_view_grants').selectAll().where('asset_id', '=', asset.id).orderBy('seq', 'desc').execute();
    return { grants: rows.map((r) => this.view(r)) };
  }

  /** Revokes a grant of an asset the caller issued (`view_grant_revoked` chained); again changes nothing. */
  async revoke(accountId: string, grantId: string) {
    const found = await this.core.db.selectFrom('vault_view_grants').select('asset_id').where('id', '=', grantId).executeTakeFirst();
    if (!found) throw notFound('View grant');
    return this.core.change(found.asset_id, accountId, 'issuer', async (c) => {
      const row = await c.trx.selectFrom('vault_view_grants').selectAll().where('id', '=', grantId).executeTakeFirstOrThrow();
      if (row.revoked_at) return this.view(row);
      await c.append('view_grant_revoked', { grant_id: row.id });
      return this.view(await c.trx.updateTable('vault_view_grants').set({ revoked_at: c.now }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow());
    });
  }

  /** The asset through a view key: exactly the key's scopes. */
  async read(token: string) {
    const { grant, scopes } = await this.live(token);
    const asset = await this.core.asset(this.core.db, grant.asset_id);
    if (!asset) throw assetNotFound();
    let summary;
    if (scopes.includes('summary')) {
      const { roles: _r, chain_url: _c, anchors_url: _a, ...fields } = assetView(this.core, asset, ['issuer']);
      summary = fields;
    }
    const holders = scopes.includes('holders') ? await this.positions.capTable(asset.id, this.core.issued(asset)) : undefined;
    let documents;
    if (scopes.includes('documents')) {
      const docs = await this.core.db.selectFrom('vault_documents').selectAll().where('asset_id', '=', asset.id).where('deleted_at', 'is', null).orderBy('seq', 'desc').execute();
      documents = docs.map((d) => documentMeta(this.core, d));
    }
    return { object: 'vault_view' as const, asset_id: asset.id, scopes, expires_at: grant.expires_at.toISOString(), ...(summary && { summary }), ...(holders && { holders }), ...(documents && { documents }) };
  }

  /** One stored document through a key with the `documents` scope (another scope: 403). */
  async document(token: string, docId: string) {
    const { grant, scopes } = await this.live(token);
    if (!scopes.includes('documents')) throw new ServiceError('forbidden', `token: this view key's scopes (${scopes.join(', ')}) do not include documents`, { param: 'token', reason: 'scope', scopes });
    const row = await this.core.db.selectFrom('vault_documents').selectAll().where('id', '=', docId).where('asset_id', '=', grant.asset_id).executeTakeFirst();
    if (!row) throw new ServiceError('not_found', 'Document not found');
    return documentContent(this.core, row);
  }

  private async live(token: string): Promise<{ grant: GrantRow; scopes: ViewScope[] }> {
    const grant = await this.core.db.selectFrom('vault_view_grants').selectAll().where('token_hash', '=', sha256Hex(token)).executeTakeFirst();
    if (!grant || grant.revoked_at || grant.expires_at.getTime() <= this.core.d.clock.now().getTime()) throw viewNotFound();
    return { grant, scopes: JSON.parse(grant.scopes) as ViewScope[] };
  }

  private view(r: GrantRow) {
    const now = this.core.d.clock.now().getTime();
    return {
      id: r.id,
      object: 'vault_view_grant' as const,
      asset_id: r.asset_id,
      scopes: JSON.parse(r.scopes) as ViewScope[],
      label: this.core.seal.openOptional(r.label_sealed, `grant:${r.id}:label`),
      state: r.revoked_at ? ('revoked' as const) : r.expires_at.getTime() <= now ? ('expired' as const) : ('active' as const),
      expires_at: r.expires_at.toISOString(),
      created_at: r.created_at.toISOString(),
      revoked_at: r.revoked_at ? r.revoked_at.toISOString() : null,
    };
  }
}
