import type { Selectable } from 'kysely';
import { ServiceError, invalid, newId } from '@svc/shared';
import type { VaultAttestationsTable } from '../../db/schema.ts';
import type { Change, VaultCore } from './core.ts';
import { SCHEME, TRUST_MODEL, figureMessage, statementMessage, statementSha, walletSigner, type Figure } from './attest-docs.ts';
import { instantOf } from '../../http/fields.ts';

type Row = Selectable<VaultAttestationsTable>;

/**
 * Attestations: a role-holder records a sealed statement; the issuer or a role-holder records a NAV or
 * reserves figure. Each is a gateway-signed document, optionally co-signed by the recorder's wallet
 * (verified on submit), chained as an event; the issuer, holders and attesters read them all.
 */
export class AttestationsService {
  constructor(private readonly core: VaultCore) {}

  async statement(accountId: string, assetId: string, input: { statement: string; role?: string | undefined; attester_signature?: string | undefined }) {
    return this.core.change(assetId, accountId, 'party', async (c) => {
      const who = await this.recorder(c, accountId, input.role, false);
      const attester = input.attester_signature ? walletSigner(statementMessage(c.asset.id, who.role, input.statement), input.attester_signature, who.wallets) : null;
      return this.record(c, accountId, 'statement', who, attester, input.statement, { statement_sha256: statementSha(input.statement) }, 'attestation_recorded');
    });
  }

  async figure(accountId: string, assetId: string, input: Omit<Figure, 'basis'> & { basis?: string | undefined; role?: string | undefined; attester_signature?: string | undefined }) {
    const asOf = instantOf(input.as_of, 'as_of');
    if (asOf.getTime() > this.core.d.clock.now().getTime()) throw invalid('as_of: must not be in the future', 'as_of');
    const f: Figure = { kind: input.kind, value_micro_usd: input.value_micro_usd, as_of: asOf.toISOString(), basis: input.basis ?? null };
    return this.core.change(assetId, accountId, 'party', async (c) => {
      const who = await this.recorder(c, accountId, input.role, true);
      const attester = input.attester_signature ? walletSigner(figureMessage(c.asset.id, who.role, f), input.attester_signature, who.wallets) : null;
      const fields = { value_micro_usd: f.value_micro_usd, as_of: f.as_of, basis_sha256: f.basis === null ? null : statementSha(f.basis) };
      return this.record(c, accountId, f.kind, who, attester, f.basis, fields, 'nav_recorded');
    });
  }

  /** Every attestation of the asset, newest first; the issuer, holders and attesters (a revoked one no longer). */
  async list(accountId: string, assetId: string) {
    const { asset } = await this.core.access(this.core.db, assetId, accountId, 'party');
    const rows = await this.core.db.selectFrom('vault_attestations').selectAll().where('asset_id', '=', asset.id).orderBy('seq', 'desc').execute();
    return { attestations: rows.map((r) => this.view(r)), asset_id: asset.id, trust_model: TRUST_MODEL };
  }

  /**
   * Who records, in which role, and which wallets may co-sign for them: an attester's active role (named
   * by `role` when they hold several), or for figures the issuer (role `issuer`) unless a role is named.
   */
  private async recorder(c: Change, accountId: string, role: string | undefined, issuerMay: boolean) {
    const rows = await this.core.attesterRows(c.trx, c.asset.id, accountId, c.wallets!);
    const asIssuer = issuerMay && c.roles.includes('issuer') && (role === undefined || role === 'issuer');
    if (asIssuer) return { role: 'issuer', attesterId: null, wallets: c.wallets! };
    if (rows.length === 0) {
      throw new ServiceError('forbidden', issuerMay ? 'Only the issuer or an attester with an active role records a figure on this asset' : 'Only an attester with an active role on this asset records a statement', { reason: 'no_role' });
    }
    const roles = [...new Set(rows.map((r) => r.role))];
    if (role === undefined && roles.length > 1) throw invalid(`role: you hold several roles on this asset (${roles.join(', ')}); name the one you record in`, 'role');
    const row = rows.find((r) => r.role === (role ?? roles[0]));
    if (!row) throw new ServiceError('forbidden', `role: you do not hold the role ${role} on this asset (you hold ${roles.join(', ')})`, { param: 'role', reason: 'no_role' });
    return { role: row.role as string, attesterId: row.id, wallets: row.wallet ? [row.wallet] : c.wallets! };
  }

  private async record(
    c: Change,
    accountId: string,
    kind: Row['kind'],
    who: { role: string; attesterId: string | null },
    attester: { address: string; message: string; signature: string } | null,
    content: string | null,
    fields: Record<string, unknown>,
    event: 'attestation_recorded' | 'nav_recorded',
  ) {
    const core = this.core;
    const id = newId('vatt_');
    const ev = await c.append(event, { attestation_id: id, kind, role: who.role, attester_id: who.attesterId, recorded_by_account_id: accountId, ...fields, attester_address: attester?.address ?? null });
    const signed = core.d.signer.signDocument({
      type: kind === 'statement' ? 'svc.vault_attestation' : 'svc.vault_figure',
      version: 1,
      attestation_id: id,
      asset_id: c.asset.id,
      kind,
      role: who.role,
      attester_id: who.attesterId,
      ...fields,
      attester,
      recorded_at: c.now.toISOString(),
      chain_seq: ev.seq,
      signer: core.d.signer.address,
    });
    const row = await c.trx
      .insertInto('vault_attestations')
      .values({
        id,
        asset_id: c.asset.id,
        kind,
        attester_id: who.attesterId,
        recorded_by_account_id: accountId,
        document_sealed: core.seal.text(signed.canonical, `attestation:${id}:document`),
        content_sealed: core.seal.optional(content, `attestation:${id}:content`),
        signature: signed.signature,
        signer: signed.signer,
        chain_seq: ev.seq,
        created_at: c.now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.view(row);
  }

  private view(r: Row) {
    const canonical = this.core.seal.openText(r.document_sealed, `attestation:${r.id}:document`);
    const document = JSON.parse(canonical) as Record<string, unknown> & { role: string; attester: { address: string } | null };
    const content = this.core.seal.openOptional(r.content_sealed, `attestation:${r.id}:content`);
    return {
      id: r.id,
      object: 'vault_attestation' as const,
      asset_id: r.asset_id,
      kind: r.kind,
      role: document.role,
      attester_id: r.attester_id,
      recorded_by_account_id: r.recorded_by_account_id,
      statement: r.kind === 'statement' ? content : null,
      basis: r.kind === 'statement' ? null : content,
      value_micro_usd: r.kind === 'statement' ? null : (document.value_micro_usd as number),
      as_of: r.kind === 'statement' ? null : (document.as_of as string),
      attester_address: document.attester?.address ?? null,
      document,
      canonical,
      signature: r.signature,
      signer: r.signer,
      scheme: SCHEME,
      chain_seq: r.chain_seq,
      created_at: r.created_at.toISOString(),
    };
  }
}
