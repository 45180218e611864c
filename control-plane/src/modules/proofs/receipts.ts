import { sql, type Kysely, type Selectable } from 'kysely';
import { notFound, type Clock } from '@svc/shared';
import type { DB, ReceiptsTable } from '../../db/schema.ts';
import { checkReceipt, parsePayload } from './integrity.ts';

export type ReceiptRow = Selectable<ReceiptsTable>;

const signerOf = (payload: Record<string, unknown> | null) => (typeof payload?.signer === 'string' ? payload.signer : null);

/** Stored receipts as their owner and the public see them. Every miss is the same 404, whatever its reason. */
export class Receipts {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly signer: string,
    private readonly publicBase: string,
  ) {}

  /** The account's receipt by request id or usage-event id. */
  async owned(accountId: string, id: string): Promise<ReceiptRow> {
    const row = await this.db
      .selectFrom('receipts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where((eb) => eb.or([eb('id', '=', id), eb('usage_event_id', '=', id)]))
      .orderBy(sql`(id = ${id})`, 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!row) throw notFound('Receipt');
    return row;
  }

  /** A receipt its owner shared, by request id. */
  async shared(id: string): Promise<ReceiptRow> {
    const row = await this.db.selectFrom('receipts').selectAll().where('id', '=', id).where('shared_at', 'is not', null).executeTakeFirst();
    if (!row) throw notFound('Receipt');
    return row;
  }

  /** Opts in or out of public fetchability; idempotent (sharing again keeps the first shared_at). */
  async setShared(accountId: string, id: string, shared: boolean) {
    const row = await this.owned(accountId, id);
    const now = this.clock.now();
    await this.db
      .updateTable('receipts')
      .set({ shared_at: shared ? sql<Date>`coalesce(shared_at, ${now})` : null })
      .where('account_id', '=', accountId)
      .where('id', '=', row.id)
      .execute();
    return { id: row.id, shared, ...this.links(row.id) };
  }

  links(id: string) {
    const e = encodeURIComponent(id);
    return {
      url: `${this.publicBase}/v1/receipts/shared/${e}`,
      page_url: `${this.publicBase}/r/${e}`,
      badge_url: `${this.publicBase}/v1/receipts/${e}/badge.svg`,
    };
  }

  view(row: ReceiptRow) {
    const payload = parsePayload(row.payload);
    return {
      id: row.id,
      usage_event_id: row.usage_event_id,
      kind: row.kind,
      payload,
      canonical: row.payload,
      hash: row.hash,
      signature: row.signature,
      signer: signerOf(payload),
      run_id: row.run_id,
      run_seq: row.run_seq,
      prev_hash: row.prev_hash,
      shared: row.shared_at !== null,
      created_at: row.created_at.toISOString(),
    };
  }

  /**
   * The public view leaves out the usage-event id (an owner-side lookup handle) and the share state;
   * the signed payload stays whole, since it is what the signature covers.
   */
  publicView(row: ReceiptRow) {
    const c = checkReceipt(row, this.signer);
    return {
      id: row.id,
      kind: row.kind,
      payload: c.payload,
      canonical: row.payload,
      hash: row.hash,
      signature: row.signature,
      signer: signerOf(c.payload),
      run_id: row.run_id,
      run_seq: row.run_seq,
      prev_hash: row.prev_hash,
      created_at: row.created_at.toISOString(),
      verification: { valid: c.valid, recovered_address: c.recovered_address, signer: this.signer },
      page_url: this.links(row.id).page_url,
    };
  }
}
