import type { Kysely } from 'kysely';
import { PREFIX, Sealer, ServiceError, newId, notFound, receiptHash, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Anchors, AnchorField } from '../anchors/service.ts';
import type { IdentityService } from '../identity/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { CALLS_CAP, COMMITMENT_SCHEME, SALT_BYTES, TRUST_MODEL, commit } from './commitment.ts';
import { allCallsCount, callById, callCount, insertCall, listCalls, markRevealed, markWithdrawn, ownedCall, type CallMeta, type CallRow } from './store.ts';

/** The anchor kind of a call's commitment (the leaf is the commitment itself). */
export const ANCHOR_KIND = 'call';

export interface Committer {
  accountId: string;
  /** The API key that commits; null for a session. */
  keyId: string | null;
}

export interface CallsDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  sealKey: Uint8Array;
  anchors: Anchors;
  identity: IdentityService;
  publicUrl: URL;
}

const callNotFound = () => notFound('Sealed call');

/**
 * Sealed calls: commit to a text now, reveal it later. The gateway draws the salt, computes the commitment,
 * signs a receipt for it at once and queues the commitment for the public anchors. Text and salt are sealed
 * at rest under the seal key (bound to the call id and to which of the two they are); reveal opens them,
 * withdrawal destroys them. Committing is not billed: the receipt is signed by the gateway's signer
 * directly, with cost 0, and kept on the call's row.
 */
export class CallsService {
  private readonly sealer: Sealer;
  private readonly base: string;

  constructor(private readonly d: CallsDeps) {
    this.sealer = new Sealer(d.sealKey);
    this.base = d.publicUrl.href.replace(/\/+$/, '');
  }
  /** For the explorer: the number of sealed calls (their ids are not listed: each is public only to whoever holds it). */
  explorerSource() {
    return { counts: async () => ({ sealed_calls: await allCallsCount(this.d.db) }) };
  }


  async commit(who: Committer, text: string, ctx: { requestId: string; route: string }) {
    const { salt, commitment } = commit(text);
    const id = newId(PREFIX.call);
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      // Commits of one account run one at a time here, so the cap holds under concurrency.
      await this.d.identity.lockAccount(trx, who.accountId);
      const n = await callCount(trx, who.accountId);
      if (n >= CALLS_CAP) {
        throw new ServiceError('conflict', `An account holds at most ${CALLS_CAP} sealed calls and this one holds ${n} (withdrawn calls count: their commitments stay)`, {
          reason: 'call_limit',
          limit: CALLS_CAP,
        });
      }
      const receipt = this.d.signer.signDocument({
        v: 1,
        id: ctx.requestId,
        kind: 'sealed_call',
        account_id: who.accountId,
        key_id: who.keyId,
        route: ctx.route,
        call_id: id,
        commitment,
        commitment_scheme: COMMITMENT_SCHEME,
        salt_bytes: SALT_BYTES,
        cost_micro_usd: 0,
        created_at: now.toISOString(),
        signer: this.d.signer.address,
      });
      return insertCall(trx, {
        id,
        account_id: who.accountId,
        key_id: who.keyId,
        state: 'committed',
        commitment,
        text_sealed: this.sealer.seal(text, `${id}:text`),
        salt_sealed: this.sealer.seal(salt, `${id}:salt`),
        receipt_id: ctx.requestId,
        receipt_payload: receipt.canonical,
        receipt_hash: receiptHash(receipt.canonical),
        receipt_signature: receipt.signature,
        created_at: now,
      });
    });
    // Queued once committed; a read of the call queues it again should this process die in between.
    const anchor = await this.d.anchors.track(ANCHOR_KIND, id, commitment);
    return this.view(row, anchor);
  }

  /** Text and salt_hex of a call of the account; idempotent; 409 once withdrawn. */
  async reveal(accountId: string, id: string) {
    const row = await markRevealed(this.d.db, accountId, id, this.d.clock.now());
    if (!row) {
      const other = await ownedCall(this.d.db, accountId, id);
      if (!other) throw callNotFound();
      throw new ServiceError('conflict', 'This sealed call was withdrawn: its text and salt are destroyed and can never be revealed', { reason: 'withdrawn', state: other.state });
    }
    const opened = this.open(row);
    const anchor = await this.d.anchors.track(ANCHOR_KIND, row.id, row.commitment);
    return { ...this.view(row, anchor), ...opened };
  }

  /** Destroys text and salt of a call of the account, whatever its state; idempotent. */
  async withdraw(accountId: string, id: string) {
    const row = await markWithdrawn(this.d.db, accountId, id, this.d.clock.now());
    if (!row) throw callNotFound();
    return this.view(row, await this.d.anchors.track(ANCHOR_KIND, row.id, row.commitment));
  }

  /** The account's calls, content-free, newest first: complete, since an account holds at most CALLS_CAP. */
  async list(accountId: string) {
    const rows = await listCalls(this.d.db, accountId, CALLS_CAP);
    const anchors = await this.d.anchors.fields(ANCHOR_KIND, rows.map((r) => ({ ref: r.id, hash: r.commitment })), true);
    return { calls: rows.map((r, i) => this.view(r, anchors[i]!)), count: rows.length, cap: CALLS_CAP as typeof CALLS_CAP, trust_model: TRUST_MODEL };
  }

  /**
   * The public record of a call: commitment, receipt and anchor always; text and salt_hex only while it is
   * revealed (a withdrawn call has neither any more). Unknown ids are not found.
   */
  async publicView(id: string) {
    const row = await callById(this.d.db, id);
    if (!row) throw callNotFound();
    const anchor = await this.d.anchors.field(ANCHOR_KIND, row.id, row.commitment);
    const opened = row.state === 'revealed' ? this.open(row) : { text: null, salt_hex: null };
    return { ...this.view(row, anchor), ...opened, commitment_scheme: COMMITMENT_SCHEME, trust_model: TRUST_MODEL };
  }

  private open(row: CallRow): { text: string; salt_hex: string } {
    if (!row.text_sealed || !row.salt_sealed) throw new Error(`sealed call ${row.id} is ${row.state} without its sealed content`);
    return {
      text: this.sealer.open(row.text_sealed, `${row.id}:text`).toString('utf8'),
      salt_hex: this.sealer.open(row.salt_sealed, `${row.id}:salt`).toString('hex'),
    };
  }

  links(id: string) {
    const e = encodeURIComponent(id);
    return { public_url: `${this.base}/v1/calls/public/${e}`, page_url: `${this.base}/c/${e}` };
  }

  private view(row: CallMeta, anchor: AnchorField) {
    const payload = JSON.parse(row.receipt_payload) as Record<string, unknown>;
    return {
      id: row.id,
      object: 'sealed_call' as const,
      state: row.state,
      commitment: row.commitment,
      created_at: row.created_at.toISOString(),
      revealed_at: row.revealed_at ? row.revealed_at.toISOString() : null,
      withdrawn_at: row.withdrawn_at ? row.withdrawn_at.toISOString() : null,
      receipt: {
        id: row.receipt_id,
        payload,
        canonical: row.receipt_payload,
        hash: row.receipt_hash,
        signature: row.receipt_signature,
        signer: typeof payload.signer === 'string' ? payload.signer : '',
      },
      anchor,
      ...this.links(row.id),
    };
  }
}
