import type { AssetRow, Role, VaultCore } from './core.ts';

export const ASSET_CLASSES = ['fund', 'equity', 'debt', 'real_estate', 'commodity', 'collectible', 'other'] as const;
export type AssetClass = (typeof ASSET_CLASSES)[number];

/**
 * What an issuer writes about an asset, every one of them sensitive: each is sealed on its own (its own
 * nonce, bound to the asset and the field). Only ids, the state, timestamps and the content-free chain are
 * stored in the clear.
 */
export const SEALED_FIELDS = ['name', 'asset_class', 'description', 'identifier', 'jurisdiction', 'terms', 'issued_micro_usd'] as const;

export interface AssetInput {
  name: string;
  asset_class: AssetClass;
  description?: string | undefined;
  identifier?: string | undefined;
  jurisdiction?: string | undefined;
  terms?: string | undefined;
  issued_micro_usd: number;
}

const aad = (id: string, field: string) => `asset:${id}:${field}`;

export function sealFields(core: VaultCore, id: string, i: AssetInput) {
  const s = core.seal;
  return {
    name_sealed: s.text(i.name, aad(id, 'name')),
    asset_class_sealed: s.text(i.asset_class, aad(id, 'asset_class')),
    description_sealed: s.optional(i.description, aad(id, 'description')),
    identifier_sealed: s.optional(i.identifier, aad(id, 'identifier')),
    jurisdiction_sealed: s.optional(i.jurisdiction, aad(id, 'jurisdiction')),
    terms_sealed: s.optional(i.terms, aad(id, 'terms')),
    issued_sealed: s.amount(i.issued_micro_usd, aad(id, 'issued')),
  };
}

/**
 * An asset as a party sees it. Every party (issuer, holder, attester) reads the descriptive fields; the
 * issued amount is the issuer's only (holders see their own position in the portfolio, the cap table is
 * the issuer's).
 */
export function assetView(core: VaultCore, a: AssetRow, roles: Role[]) {
  const s = core.seal;
  const issuer = roles.includes('issuer');
  const e = encodeURIComponent(a.id);
  return {
    id: a.id,
    object: 'vault_asset' as const,
    state: a.state,
    roles,
    name: s.openText(a.name_sealed, aad(a.id, 'name')),
    asset_class: s.openText(a.asset_class_sealed, aad(a.id, 'asset_class')),
    description: s.openOptional(a.description_sealed, aad(a.id, 'description')),
    identifier: s.openOptional(a.identifier_sealed, aad(a.id, 'identifier')),
    jurisdiction: s.openOptional(a.jurisdiction_sealed, aad(a.id, 'jurisdiction')),
    terms: s.openOptional(a.terms_sealed, aad(a.id, 'terms')),
    issued_micro_usd: issuer ? core.issued(a) : null,
    sealed_fields: [...SEALED_FIELDS],
    created_at: a.created_at.toISOString(),
    closed_at: a.closed_at ? a.closed_at.toISOString() : null,
    chain_length: a.chain_length,
    chain_head: a.chain_head,
    chain_url: `${core.base}/v1/vault/chain/${e}`,
    anchors_url: `${core.base}/v1/vault/anchors/${e}`,
  };
}
