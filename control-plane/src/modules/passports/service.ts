import type { Kysely } from 'kysely';
import { ServiceError, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Anchors } from '../anchors/service.ts';
import { TREE } from '../anchors/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { publicBase } from '../proofs/deps.ts';
import { provableHistory } from '../proofs/history.ts';
import { COMMITMENT_ALGORITHM, canonicalInputs, commitmentInputs, commitmentOf, passportDocument, type CommitmentInputs } from './commitment.ts';
import { assertClaimable } from './handles.ts';
import { PassportStore, type HandleRow, type PassportRow } from './store.ts';

/** How `signDocument` signs: EIP-191 personal_sign over the RFC 8785 canonical JSON. */
export const SIGNED_SCHEME = 'eip191-personal_sign/rfc8785';
export const DIRECTORY_ORDER = 'verified_runs desc, receipts desc, handle asc';

export interface PassportsDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  anchors: Anchors;
  publicUrl: URL;
}

const taken = (handle: string) => new ServiceError('conflict', `The handle "${handle}" is taken; a handle is never reassigned`, { param: 'handle' });
const holdsOther = (held: string | undefined) =>
  new ServiceError('conflict', `This account already holds the handle "${held ?? '(another)'}"; an account has one handle, for good. POST it again to mint a fresh passport`, { param: 'handle' });

/** The anchor reference of a passport version: one leaf per version. */
export const anchorRef = (handle: string, version: number) => `${handle}/${version}`;

/**
 * Passports: a handle claimed once per account (reserved for good), and versions of a signed credential
 * minted from the account's provable history, with a recomputable commitment queued for public anchoring.
 * Owns passport_handles and passports; reads history through the proofs module.
 */
export class PassportsService {
  readonly store: PassportStore;
  private readonly base: string;

  constructor(private readonly d: PassportsDeps) {
    this.store = new PassportStore(d.db);
    this.base = publicBase(d.publicUrl);
  }

  /**
   * Claims `handle` for the account (first POST) or re-mints the passport at the handle it holds (later POSTs)
   * over its history as it stands now. A taken handle, a second handle, a malformed or reserved one: refused,
   * nothing written.
   */
  async mint(accountId: string, handle: string) {
    assertClaimable(handle);
    const own = await this.store.handleOf(accountId);
    if (own && own.handle !== handle) throw holdsOther(own.handle);
    if (!own && (await this.store.handle(handle))) throw taken(handle);
    const history = await provableHistory(this.d.db, accountId, this.d.signer.address);
    const { row, claimed } = await this.d.db.transaction().execute(async (trx) => {
      const claimed = await this.store.claim(trx, handle, accountId, this.d.clock.now());
      const h = await this.store.lock(trx, handle);
      if (!h) throw holdsOther((await this.store.handleOf(accountId, trx))?.handle); // this account claimed another one meanwhile
      if (h.account_id !== accountId) throw taken(handle);
      const version = h.current_version + 1;
      const inputs = commitmentInputs(handle, version, accountId, history, this.d.signer.address, this.d.clock.now());
      const text = canonicalInputs(inputs);
      const commitment = commitmentOf(text);
      const signed = this.d.signer.signDocument(passportDocument(inputs, commitment, this.d.signer.address));
      const row: PassportRow = {
        handle,
        version,
        account_id: accountId,
        verified_runs: inputs.verified_runs,
        receipts: inputs.receipts,
        commitment,
        inputs: text,
        document: signed.canonical,
        signature: signed.signature,
        signer: signed.signer,
        issued_at: new Date(inputs.issued_at),
      };
      await this.store.insertVersion(trx, row);
      return { row, claimed };
    });
    const view = await this.view(row);
    return { ...view, claimed_now: claimed };
  }

  /** The current passport at a handle, or the uniform 404. */
  async current(handle: string): Promise<PassportRow> {
    const row = await this.store.current(handle);
    if (!row) throw notFound('Passport');
    return row;
  }

  /**
   * The handle the account holds, locked for the caller's transaction (KYA mints at one handle run one at a
   * time), with its current passport. A handle of another account is refused (403); no such handle, 404.
   */
  async lockOwned(trx: Kysely<DB>, accountId: string, handle: string): Promise<{ handle: HandleRow; passport: PassportRow }> {
    const h = await this.store.lock(trx, handle);
    if (!h || h.current_version === 0) throw new ServiceError('not_found', `No passport has the handle "${handle}"; claim one with POST /v1/passport`, { param: 'handle' });
    if (h.account_id !== accountId) throw new ServiceError('forbidden', `The handle "${handle}" belongs to another account`, { param: 'handle' });
    const passport = await this.store.current(handle, trx);
    return { handle: h, passport: passport! };
  }

  links(handle: string) {
    const e = encodeURIComponent(handle);
    return {
      url: `${this.base}/v1/passport/${e}`,
      proof_url: `${this.base}/v1/passport/${e}/proof`,
      registry_url: `${this.base}/v1/registry/identity/${e}`,
      kya_url: `${this.base}/v1/kya/public/${e}`,
    };
  }

  credential(row: PassportRow) {
    return { document: JSON.parse(row.document) as Record<string, unknown>, signature: row.signature, signer: row.signer, canonical: row.document, scheme: SIGNED_SCHEME };
  }

  /** The anchor field of a passport version; queues its commitment if it is not queued yet (a mint whose process died after commit). */
  anchor(row: PassportRow) {
    return this.d.anchors.track('passport', anchorRef(row.handle, row.version), row.commitment);
  }

  async view(row: PassportRow) {
    return {
      object: 'passport' as const,
      handle: row.handle,
      version: row.version,
      verified_runs: row.verified_runs,
      receipts: row.receipts,
      commitment: row.commitment,
      issued_at: row.issued_at.toISOString(),
      credential: this.credential(row),
      anchor: await this.anchor(row),
      ...this.links(row.handle),
    };
  }

  async get(handle: string) {
    return this.view(await this.current(handle));
  }

  /** The public directory. */
  async directory() {
    const agents = (await this.store.directory()).map((h) => this.entry(h));
    return { agents, count: agents.length, ordered_by: DIRECTORY_ORDER };
  }

  /** For the explorer: how many passports, and the newest minted. */
  explorerSource() {
    return {
      counts: async () => ({ passports: (await this.store.minted(0)).count }),
      recent: async (limit: number) => (await this.store.minted(limit)).newest.map((h) => this.entry(h)),
    };
  }

  private entry(h: { handle: string; current_version: number; verified_runs: number; receipts: number; updated_at: Date }) {
    return {
      handle: h.handle,
      version: h.current_version,
      verified_runs: h.verified_runs,
      receipts: h.receipts,
      issued_at: h.updated_at.toISOString(),
      url: this.links(h.handle).url,
    };
  }

  /** Everything needed to recompute the commitment and check its inclusion offline. */
  async proof(handle: string) {
    const row = await this.current(handle);
    const a = await this.anchor(row);
    const inputs = JSON.parse(row.inputs) as CommitmentInputs;
    return {
      object: 'passport_proof' as const,
      handle: row.handle,
      version: row.version,
      credential: this.credential(row),
      commitment_inputs: inputs,
      commitment_canonical: row.inputs,
      commitment_algorithm: COMMITMENT_ALGORITHM,
      commitment: row.commitment,
      anchor_state: a.state,
      batch_root: a.root,
      leaf_index: a.leaf_index,
      tree_size: a.tree_size,
      audit_path: a.proof,
      tree: TREE,
      anchors: a.anchors,
      anchor_document_url: a.root ? `${this.base}/v1/anchors/${a.root}` : null,
      verify: VERIFY_STEPS,
    };
  }
}

export const VERIFY_STEPS = [
  '1. Signature: recover the EIP-191 (personal_sign) signer of credential.canonical with credential.signature; it must equal GET /v1/receipts/pubkey .address and credential.signer. credential.canonical must be the RFC 8785 canonical JSON of credential.document.',
  '2. Commitment: SHA-256 of the UTF-8 bytes of the RFC 8785 canonical JSON of commitment_inputs, as 0x-hex, must equal commitment and credential.document.commitment (commitment_canonical is that JSON as hashed).',
  '3. Inputs: commitment_inputs.handle, version, account_id, verified_runs and receipts equal the credential\'s; run_heads holds exactly verified_runs hashes in ascending order.',
  '4. Inclusion: from the leaf commitment (its 32 bytes), leaf_index, tree_size and audit_path, RFC 9162 section 2.1.3.2 with the tree rules in `tree` must give batch_root.',
  '5. Anchor: each anchors[] entry with state anchored names a transaction carrying batch_root (on an EVM chain: from = to = the entry\'s from, value 0, input 0x7376636101 followed by the root, receipt status 1); anchor_document_url gives each backend\'s own steps.',
];
