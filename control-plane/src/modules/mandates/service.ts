import type { Kysely } from 'kysely';
import { SCOPE_NAMES, ServiceError, canonicalize, checksumAddress, invalid, newId, recoverPersonalMessage, type Clock, type Scope } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { IdentityService } from '../identity/service.ts';
import type { KeysService } from '../keys/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { mandateModels, mandateRoutes, type KeyRoute } from './bounds.ts';
import { proofDocument, type MandateDocument, type MandateStatus } from './document.ts';
import { insertMandate, listMandates, liveMandateCount, mandateExists, mandateOf, markRevoked, type MandateRow } from './store.ts';
import type { PolicyInput } from '../policies/content.ts';
import { instantOf } from '../../http/fields.ts';

export const MANDATE_ID_PREFIX = 'mdt_';
/** Mandates an account holds at once (neither revoked nor expired). */
export const MAX_LIVE_MANDATES = 200;
const MANDATE_ID = /^mdt_[0-9a-z]{24}$/;
const SCHEME = 'eip191-personal_sign/rfc8785';

export interface MandatesDeps {
  db: Kysely<DB>;
  clock: Clock;
  keys: KeysService;
  identity: IdentityService;
  signer: ReceiptSigner;
}

export interface MandateInput {
  parent_key_id: string;
  purpose: string;
  spend_cap_micro_usd: number;
  expires_at: string;
  scopes?: Scope[] | undefined;
  allowed_models?: string[] | undefined;
  allowed_routes?: string[] | undefined;
  /** The id the prepare step drew, which the co-signed document names; only with owner_signature. */
  mandate_id?: string | undefined;
  owner_signature?: string | undefined;
  /** A policy for the mandate key, added to the parent key's (policies module). */
  policy?: PolicyInput | undefined;
}

type KeyView = Awaited<ReturnType<KeysService['get']>>;

/**
 * Mandates: a bounded grant (parent key, spend cap, expiry, scopes, model and route allow lists, purpose)
 * carried by a delegated sub-key minted for it, and a signed mandate document. The owner may co-sign the
 * document with a wallet linked to the account. Owns the mandates table; keys and wallets are reached
 * through their services, the key's state read at each answer.
 */
export class MandatesService {
  constructor(private readonly d: MandatesDeps) {}

  /** The document a wallet co-signs, for these fields; nothing is written. */
  async prepare(accountId: string, input: MandateInput, keyRoutes: readonly KeyRoute[]) {
    if (input.owner_signature !== undefined) throw invalid('owner_signature: send it without prepare, with the mandate_id this step returns', 'owner_signature');
    if (input.mandate_id !== undefined) throw invalid('mandate_id: the prepare step draws the id; omit it', 'mandate_id');
    const { doc } = await this.terms(accountId, newId(MANDATE_ID_PREFIX), input, keyRoutes);
    return {
      object: 'mandate_terms' as const,
      mandate_id: doc.mandate_id,
      document: doc,
      canonical: canonicalize(doc),
      scheme: SCHEME,
      linked_wallets: (await this.d.identity.listWallets(accountId)).map((w) => w.address),
      next: 'Sign `canonical` with EIP-191 personal_sign using a wallet linked to this account, then POST /v1/mandates again with the same fields, mandate_id and owner_signature.',
    };
  }

  async create(accountId: string, input: MandateInput, keyRoutes: readonly KeyRoute[]) {
    if (input.owner_signature !== undefined && input.mandate_id === undefined) {
      throw invalid('mandate_id: required with owner_signature: the id from the prepare step, which the signed document names', 'mandate_id');
    }
    if (input.mandate_id !== undefined && input.owner_signature === undefined) {
      throw invalid('owner_signature: required with mandate_id (a mandate without a co-signature draws its own id)', 'owner_signature');
    }
    if (input.mandate_id !== undefined && !MANDATE_ID.test(input.mandate_id)) throw invalid('mandate_id: not an id drawn by the prepare step (mdt_ and 24 characters)', 'mandate_id');
    const id = input.mandate_id ?? newId(MANDATE_ID_PREFIX);
    const { doc, parent } = await this.terms(accountId, id, input, keyRoutes);
    const owner = input.owner_signature === undefined ? null : await this.coSigner(accountId, canonicalize(doc), input.owner_signature);
    const signed = this.d.signer.signDocument(doc);
    const now = this.d.clock.now();
    try {
      return await this.d.db.transaction().execute(async (trx) => {
        // Creations of one account run one at a time from here, so the limit holds under concurrency.
        await this.d.identity.lockAccount(trx, accountId);
        if (await mandateExists(trx, id)) throw used();
        const live = await liveMandateCount(trx, accountId, now);
        if (live >= MAX_LIVE_MANDATES) {
          throw new ServiceError('conflict', `An account holds at most ${MAX_LIVE_MANDATES} live mandates and this one holds ${live}; revoke one (DELETE /v1/mandates/:id) or let one expire`, {
            reason: 'mandate_limit',
            limit: MAX_LIVE_MANDATES,
          });
        }
        const key = await this.d.keys.delegate(
          parent,
          {
            name: `Mandate: ${doc.purpose}`.slice(0, 100),
            scopes: doc.scopes,
            spend_cap_micro_usd: doc.spend_cap_micro_usd,
            expires_at: doc.expires_at,
            allowed_models: doc.allowed_models,
            allowed_routes: doc.allowed_routes,
            managed_by: 'mandate',
            policy: input.policy,
          },
          trx,
        );
        const row = await insertMandate(trx, {
          id,
          account_id: accountId,
          parent_key_id: doc.parent_key_id,
          key_id: key.id,
          canonical: signed.canonical,
          signature: signed.signature,
          signer: signed.signer,
          owner_address: owner?.address.toLowerCase() ?? null,
          owner_signature: owner?.signature ?? null,
          spend_cap_micro_usd: doc.spend_cap_micro_usd,
          expires_at: new Date(doc.expires_at),
          created_at: now,
          revoked_at: null,
        });
        return { ...this.view(row, key), key: key.key };
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw used(); // the same prepared id sent twice at once, from two accounts
      throw e;
    }
  }

  /** The newest mandates of the account, each with its key's state now. */
  async list(accountId: string) {
    const rows = await listMandates(this.d.db, accountId);
    const keys = await this.d.keys.getMany(accountId, rows.map((r) => r.key_id));
    return rows.map((r) => this.view(r, keys.get(r.key_id)));
  }

  /** Revokes the mandate and its key's whole delegated subtree. Idempotent. */
  async revoke(accountId: string, id: string) {
    const now = this.d.clock.now();
    const res = await this.d.db.transaction().execute(async (trx) => {
      const row = await mandateOf(trx, accountId, id, true);
      await markRevoked(trx, id, now);
      const r = await this.d.keys.revokeWithin(trx, accountId, row.key_id);
      return { id, object: 'mandate' as const, revoked: true as const, revoked_at: (row.revoked_at ?? now).toISOString(), key_id: row.key_id, revoked_ids: r.revoked_ids };
    });
    await this.d.keys.accountChanged(accountId);
    return res;
  }

  /** The authorization certificate: the document, both signatures, the key, status and spend now; gateway-signed. */
  async proof(accountId: string, id: string) {
    const row = await mandateOf(this.d.db, accountId, id);
    const key = await this.d.keys.get(accountId, row.key_id);
    const s = this.d.signer.signDocument(
      proofDocument({
        document: JSON.parse(row.canonical) as MandateDocument,
        signature: row.signature,
        owner: ownerOf(row),
        keyId: row.key_id,
        keyPrefix: key.prefix,
        status: statusOf(row, key),
        spentMicroUsd: key.subtree_spent_micro_usd,
        createdAt: row.created_at,
        revokedAt: row.revoked_at ?? (key.revoked_at ? new Date(key.revoked_at) : null),
        signer: this.d.signer.address,
        now: this.d.clock.now(),
      }),
    );
    return { proof: s.document, signature: s.signature, signer: s.signer, canonical: s.canonical, scheme: s.scheme };
  }

  /**
   * The mandate document for these fields, checked against the parent key (one of the account's, active):
   * scopes it holds, an expiry no later than its own, a cap within what it has left, allow lists within its
   * chain's. Each refusal is a 400 naming the field.
   */
  private async terms(accountId: string, id: string, input: MandateInput, keyRoutes: readonly KeyRoute[]): Promise<{ doc: MandateDocument; parent: KeyPrincipal }> {
    const now = this.d.clock.now();
    const parentView = await this.d.keys.get(accountId, input.parent_key_id).catch((e: unknown) => {
      if (e instanceof ServiceError && e.type === 'not_found') throw invalid(`parent_key_id: this account has no API key ${input.parent_key_id}`, 'parent_key_id');
      throw e;
    });
    if (parentView.status !== 'active') {
      const why = parentView.status === 'expiring' ? `was rotated to ${parentView.rotated_to}; use the live key` : `is ${parentView.status}`;
      throw invalid(`parent_key_id: the API key ${parentView.id} ${why}`, 'parent_key_id');
    }
    const parent = await this.d.keys.principalOf(parentView.id);

    const scopes = input.scopes?.length ? SCOPE_NAMES.filter((s) => input.scopes!.includes(s)) : parent.scopes;
    const missing = scopes.filter((s) => !parent.scopes.includes(s));
    if (missing.length) throw invalid(`scopes: the parent key does not hold ${missing.join(', ')}; a mandate's scopes are a subset of its parent's (${parent.scopes.join(', ')})`, 'scopes');

    const expires = instantOf(input.expires_at, 'expires_at');
    if (expires.getTime() <= now.getTime()) throw invalid('expires_at: must be in the future', 'expires_at');
    if (parent.expiresAt && expires > parent.expiresAt) throw invalid(`expires_at: must not be later than the parent key's expiry (${parent.expiresAt.toISOString()})`, 'expires_at');

    if (parentView.spend_cap_micro_usd !== null) {
      const remaining = Math.max(0, parentView.spend_cap_micro_usd - parentView.subtree_spent_micro_usd);
      if (input.spend_cap_micro_usd > remaining) throw invalid(`spend_cap_micro_usd: must not exceed the parent key's remaining cap (${remaining})`, 'spend_cap_micro_usd');
    }

    const doc: MandateDocument = {
      type: 'svc.mandate',
      version: 1,
      mandate_id: id,
      account_id: accountId,
      parent_key_id: parentView.id,
      purpose: input.purpose,
      scopes,
      spend_cap_micro_usd: input.spend_cap_micro_usd,
      expires_at: expires.toISOString(),
      allowed_models: mandateModels(input.allowed_models, parent.allowLists),
      allowed_routes: mandateRoutes(input.allowed_routes, parent.allowLists, keyRoutes),
      gateway: this.d.signer.address,
    };
    return { doc, parent };
  }

  /** The linked wallet whose EIP-191 signature over `canonical` this is; a wallet not linked to the account is refused. */
  private async coSigner(accountId: string, canonical: string, signature: string): Promise<{ address: string; signature: string }> {
    const recovered = recoverPersonalMessage(canonical, signature);
    if (!recovered) throw invalid('owner_signature: not an EIP-191 signature (0x and 65 bytes of hex)', 'owner_signature');
    const linked = await this.d.identity.listWallets(accountId);
    if (!linked.some((w) => w.address.toLowerCase() === recovered.toLowerCase())) {
      throw new ServiceError(
        'forbidden',
        `owner_signature: recovers to ${checksumAddress(recovered)}, which is not a wallet linked to this account; sign the prepared document's canonical text, unchanged, with a linked wallet (GET /v1/auth/wallets)`,
        { param: 'owner_signature', recovered_address: checksumAddress(recovered) },
      );
    }
    return { address: checksumAddress(recovered), signature };
  }

  private view(r: MandateRow, key: KeyView | undefined) {
    const doc = JSON.parse(r.canonical) as MandateDocument;
    const spent = key?.subtree_spent_micro_usd ?? 0;
    return {
      id: r.id,
      object: 'mandate' as const,
      status: statusOf(r, key),
      purpose: doc.purpose,
      parent_key_id: r.parent_key_id,
      key_id: r.key_id,
      key_prefix: key?.prefix ?? null,
      scopes: doc.scopes,
      spend_cap_micro_usd: doc.spend_cap_micro_usd,
      spent_micro_usd: spent,
      remaining_micro_usd: Math.max(0, doc.spend_cap_micro_usd - spent),
      allowed_models: doc.allowed_models,
      allowed_routes: doc.allowed_routes,
      expires_at: doc.expires_at,
      created_at: r.created_at.toISOString(),
      revoked_at: r.revoked_at?.toISOString() ?? key?.revoked_at ?? null,
      owner: ownerOf(r),
      document: doc,
      canonical: r.canonical,
      signature: r.signature,
      signer: r.signer,
      scheme: SCHEME,
    };
  }
}

const used = () => new ServiceError('conflict', 'mandate_id: a mandate with this id exists already; prepare new terms for another mandate', { param: 'mandate_id' });

function ownerOf(r: MandateRow): { address: string; signature: string } | null {
  return r.owner_address && r.owner_signature ? { address: checksumAddress(r.owner_address), signature: r.owner_signature } : null;
}

/** Revoked (the mandate, or its key with its parent's subtree), expired, frozen by the breaker, or active. */
function statusOf(r: MandateRow, key: KeyView | undefined): MandateStatus {
  if (r.revoked_at || !key || key.status === 'revoked') return 'revoked';
  if (key.status === 'expired') return 'expired';
  if (key.status === 'frozen') return 'frozen';
  return 'active';
}
