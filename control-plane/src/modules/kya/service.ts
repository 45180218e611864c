import type { Kysely } from 'kysely';
import { ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeysService, KeyStatus } from '../keys/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { SIGNED_SCHEME, type PassportsService } from '../passports/service.ts';
import { KyaStore, stateOf, type KyaRow } from './store.ts';
import { mandateOf } from '../mandates/store.ts';

export const KYA_ID_PREFIX = 'kya_';

export interface KyaDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  keys: KeysService;
  passports: PassportsService;
  /** The digest of the policy a key carries (policies module). */
  policies: { liveDigest(accountId: string, id: string): Promise<string | null> };
}

export interface MintInput {
  handle: string;
  key_id?: string | undefined;
  mandate_id?: string | undefined;
}



type KeyView = Awaited<ReturnType<KeysService['list']>>[number];

/**
 * KYA credentials: a signed statement over a handle the account holds, bound to one of its API keys or to one
 * of its mandates (then to the mandate's key, with the mandate's id, signed purpose and expiry in the binding), with the
 * key's caps, policy hashes, a gateway attestation and the passport's verified history. A new credential
 * supersedes the handle's current one in the same transaction. Owns kya_credentials; keys and passports are
 * read through their services, the key's state at read time.
 */
export class KyaService {
  private readonly store: KyaStore;

  constructor(private readonly d: KyaDeps) {
    this.store = new KyaStore(d.db);
  }

  async mint(accountId: string, input: MintInput) {
    if (input.mandate_id !== undefined && input.key_id !== undefined) throw invalid('mandate_id: give key_id or mandate_id, not both (a mandate brings its own key)', 'mandate_id');
    if (input.key_id === undefined && input.mandate_id === undefined) throw invalid('key_id is required: the API key of your account the credential is bound to (or mandate_id, a mandate of yours)', 'key_id');
    const now0 = this.d.clock.now();
    // Another account's mandate is the same answer as an unknown one.
    const mandate = input.mandate_id === undefined ? null : await mandateOf(this.d.db, accountId, input.mandate_id).catch(() => {
      throw new ServiceError('not_found', `No mandate ${input.mandate_id} on this account`, { param: 'mandate_id' });
    });
    if (mandate && (mandate.revoked_at || mandate.expires_at <= now0)) {
      throw invalid(`mandate_id: the mandate ${mandate.id} is ${mandate.revoked_at ? 'revoked' : 'expired'}; a credential binds a live mandate`, 'mandate_id');
    }
    const param = mandate ? 'mandate_id' : 'key_id';
    const keyId = mandate ? mandate.key_id : input.key_id!;
    const keys = await this.d.keys.list(accountId);
    const key = keys.find((k) => k.id === keyId);
    // Another account's key is the same answer as an unknown one.
    if (!key) throw new ServiceError('not_found', `No API key ${keyId} on this account`, { param });
    if (key.status !== 'active') throw invalid(`${param}: the API key ${key.id} is ${key.status}; a credential binds an active key`, param);
    const binding = mandate
      ? { kind: 'mandate' as const, mandate_id: mandate.id, key_id: key.id, purpose: (JSON.parse(mandate.canonical) as { purpose?: string }).purpose ?? null, expires_at: mandate.expires_at.toISOString() }
      : { kind: 'key' as const, key_id: key.id };
    // The sha256 of the live policy the key carries (GET /v1/policies), if any: what the gateway enforces on it.
    const policyId = (key as { policy_id?: string | null }).policy_id ?? null;
    const digest = policyId ? await this.d.policies.liveDigest(accountId, policyId) : null;
    const policyHashes = digest ? [digest] : [];
    const signer = this.d.signer;
    const row = await this.d.db.transaction().execute(async (trx) => {
      const { passport } = await this.d.passports.lockOwned(trx, accountId, input.handle);
      const now = this.d.clock.now();
      const id = newId(KYA_ID_PREFIX);
      const previous = await this.store.supersede(trx, passport.handle, id, now);
      const history = { passport_version: passport.version, verified_runs: passport.verified_runs, receipts: passport.receipts, commitment: passport.commitment };
      const caps = capsOf(key);
      const statement = attestationStatement(signer.address, passport.handle, key, caps, history, now);
      const attestation = signer.signDocument({ type: 'svc.kya_attestation' as const, statement });
      const doc = {
        type: 'svc.kya_credential' as const,
        v: 1 as const,
        id,
        handle: passport.handle,
        account_id: accountId,
        binding,
        caps,
        policy_hashes: policyHashes,
        attestation: { statement, canonical: attestation.canonical, signature: attestation.signature, signer: attestation.signer },
        verified_history: history,
        supersedes: previous,
        issued_at: now.toISOString(),
        signer: signer.address,
      };
      const signed = signer.signDocument(doc);
      const r = {
        id,
        handle: passport.handle,
        account_id: accountId,
        key_id: key.id,
        document: signed.canonical,
        signature: signed.signature,
        signer: signed.signer,
        created_at: now,
        superseded_at: null,
        superseded_by: null,
        revoked_at: null,
      };
      return this.store.insert(trx, r);
    });
    return this.view(row, key.status);
  }

  /** The account's credentials, newest first, each with its state and its key's state now. */
  async list(accountId: string) {
    const [rows, keys] = await Promise.all([this.store.list(accountId), this.d.keys.list(accountId)]);
    const status = new Map(keys.map((k) => [k.id, k.status]));
    return { credentials: rows.map((r) => this.view(r, status.get(r.key_id) ?? null)) };
  }

  /** Revokes a credential of the account; idempotent (the first revocation time stays). */
  async revoke(accountId: string, id: string) {
    const row = await this.store.revoke(accountId, id, this.d.clock.now());
    if (!row) throw notFound('KYA credential');
    return this.view(row, await this.keyState(row));
  }

  /** The credential current at a handle, unless there is none or it was revoked (both the same 404). */
  async publicAt(handle: string) {
    const row = await this.store.current(handle);
    if (!row || row.revoked_at) throw notFound('KYA credential');
    return { ...this.view(row, await this.keyState(row)), passport_url: this.d.passports.links(row.handle).url };
  }

  async activeId(handle: string): Promise<string | null> {
    const row = await this.store.current(handle);
    return row && !row.revoked_at ? row.id : null;
  }

  private async keyState(row: KyaRow): Promise<KeyStatus | null> {
    return (await this.d.keys.list(row.account_id)).find((k) => k.id === row.key_id)?.status ?? null;
  }

  private view(r: KyaRow, keyState: KeyStatus | null) {
    return {
      object: 'kya_credential' as const,
      id: r.id,
      handle: r.handle,
      key_id: r.key_id,
      state: stateOf(r),
      key_state: keyState ?? ('unknown' as const),
      created_at: r.created_at.toISOString(),
      superseded_at: r.superseded_at?.toISOString() ?? null,
      superseded_by: r.superseded_by,
      revoked_at: r.revoked_at?.toISOString() ?? null,
      credential: { document: JSON.parse(r.document) as Record<string, unknown>, signature: r.signature, signer: r.signer, canonical: r.document, scheme: SIGNED_SCHEME },
    };
  }
}

function capsOf(key: KeyView) {
  return {
    spend_cap_micro_usd: key.spend_cap_micro_usd,
    scopes: key.scopes,
    all_scopes: key.scopes.length === 0,
    expires_at: key.expires_at,
    delegated_from: key.parent_id,
  };
}

function attestationStatement(
  signer: string,
  handle: string,
  key: KeyView,
  caps: ReturnType<typeof capsOf>,
  h: { passport_version: number; verified_runs: number; receipts: number; commitment: string },
  at: Date,
): string {
  const cap = caps.spend_cap_micro_usd === null ? 'no spend cap' : `a lifetime spend cap of ${caps.spend_cap_micro_usd} micro-USD`;
  const scopes = caps.all_scopes ? 'every scope' : `the scopes ${caps.scopes.join(', ')}`;
  const expiry = caps.expires_at ? `expires at ${caps.expires_at}` : 'has no expiry';
  return (
    `The gateway signer ${signer} attests that at ${at.toISOString()} the API key ${key.id} belonged to the account holding the handle "${handle}" and was active, ` +
    `with ${cap} and ${scopes}, and ${expiry}; and that passport version ${h.passport_version} of "${handle}" counts ${h.verified_runs} verified runs and ` +
    `${h.receipts} verified receipts (commitment ${h.commitment}). It attests to these records only: not to who operates the key, nor to what the key will be used for.`
  );
}
