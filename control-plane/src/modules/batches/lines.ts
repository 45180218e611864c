import { sql, type Kysely } from 'kysely';
import { PREFIX, Sealer, randomId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { BatchLine } from '../files/jsonl.ts';

export interface RunningLine {
  line: number;
  request_id: string;
  attempt: number;
  status_code: number | null;
  claimed_at: Date;
  has_output: boolean;
}

export interface Claim {
  requestId: string;
  attempt: number;
}

/**
 * The `batch_lines` rows of the batches module. A line is claimed by inserting its row with the request id
 * its hold, usage event and receipt will carry (one claimer wins the primary key, and only while the batch
 * is in progress and inside its window). The answer is stored sealed (aad = request id) before the charge
 * settles; the row is finished after. Every write after the claim is conditioned on the claim's attempt,
 * so a stale attempt never overwrites a newer one.
 */
export class LineStore {
  private readonly sealer: Sealer;
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    sealKey: Uint8Array,
  ) {
    this.sealer = new Sealer(sealKey);
  }

  seal(requestId: string, body: unknown): Buffer {
    return this.sealer.seal(JSON.stringify(body), requestId);
  }

  open(requestId: string, output: Uint8Array): unknown {
    return JSON.parse(this.sealer.open(output, requestId).toString('utf8'));
  }

  private live(batchId: string, now: Date) {
    return sql<boolean>`exists (select 1 from batches where id = ${batchId} and status = 'in_progress' and expires_at > ${now})`;
  }

  /** Claims a line not run before; null when another claimer has it or the batch stopped running. */
  async claim(batchId: string, l: BatchLine): Promise<Claim | null> {
    const now = this.clock.now();
    const requestId = PREFIX.request + randomId(20);
    const r = await sql<{ line: number }>`
      insert into batch_lines (batch_id, line, custom_id, request_id, attempt, status, claimed_at)
      select ${batchId}, ${l.line}, ${l.custom_id}, ${requestId}, 1, 'running', ${now}
      where ${this.live(batchId, now)}
      on conflict (batch_id, line) do nothing
      returning line`.execute(this.db);
    return r.rows.length ? { requestId, attempt: 1 } : null;
  }

  /** Takes over a line an earlier attempt left running uncharged: same request id, next attempt. */
  async reclaim(batchId: string, r: RunningLine): Promise<Claim | null> {
    const now = this.clock.now();
    const row = await this.db
      .updateTable('batch_lines')
      .set({ attempt: r.attempt + 1, claimed_at: now, output: null, status_code: null })
      .where('batch_id', '=', batchId)
      .where('line', '=', r.line)
      .where('attempt', '=', r.attempt)
      .where('status', '=', 'running')
      .where(this.live(batchId, now))
      .returning('attempt')
      .executeTakeFirst();
    return row ? { requestId: r.request_id, attempt: row.attempt } : null;
  }

  /** Records the answer before the charge settles; throws (so the hold is released) if the claim was lost. */
  async storeAnswer(batchId: string, line: number, c: Claim, body: unknown): Promise<void> {
    const r = await this.db
      .updateTable('batch_lines')
      .set({ output: this.seal(c.requestId, body), status_code: 200 })
      .where('batch_id', '=', batchId)
      .where('line', '=', line)
      .where('attempt', '=', c.attempt)
      .where('status', '=', 'running')
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new Error(`batch ${batchId} line ${line}: claim attempt ${c.attempt} was taken over`);
  }

  /** Ends a line and counts it on its batch, in one transaction; `output` undefined keeps the stored answer. */
  async finish(batchId: string, line: number, attempt: number, status: 'succeeded' | 'failed', statusCode: number | null, output?: Buffer | null): Promise<void> {
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('batch_lines')
        .set({ status, status_code: statusCode, ended_at: now, ...(output !== undefined ? { output } : {}) })
        .where('batch_id', '=', batchId)
        .where('line', '=', line)
        .where('attempt', '=', attempt)
        .where('status', '=', 'running')
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) !== 1) return;
      await trx
        .updateTable('batches')
        .set((eb) => (status === 'succeeded' ? { completed: eb('completed', '+', 1) } : { failed: eb('failed', '+', 1) }))
        .where('id', '=', batchId)
        .execute();
    });
  }

  /** Gives a line back unrun (the gateway is stopping and the line was not charged). */
  async release(batchId: string, line: number, attempt: number): Promise<void> {
    await this.db.deleteFrom('batch_lines').where('batch_id', '=', batchId).where('line', '=', line).where('attempt', '=', attempt).where('status', '=', 'running').execute();
  }

  /** Whether a receipt (so a charge) exists for a request id: the money path writes it with the charge. */
  async charged(requestId: string): Promise<boolean> {
    return (await this.db.selectFrom('receipts').select('id').where('id', '=', requestId).executeTakeFirst()) !== undefined;
  }

  async running(batchId: string): Promise<RunningLine[]> {
    return this.db
      .selectFrom('batch_lines')
      .select(['line', 'request_id', 'attempt', 'status_code', 'claimed_at', sql<boolean>`output is not null`.as('has_output')])
      .where('batch_id', '=', batchId)
      .where('status', '=', 'running')
      .execute();
  }

  /** Line numbers that have a row (claimed, whatever its state). */
  async claimed(batchId: string): Promise<Set<number>> {
    const rows = await this.db.selectFrom('batch_lines').select('line').where('batch_id', '=', batchId).execute();
    return new Set(rows.map((r) => r.line));
  }

  async ended(batchId: string): Promise<number> {
    const r = await this.db.selectFrom('batch_lines').select((eb) => eb.fn.countAll<number>().as('n')).where('batch_id', '=', batchId).where('status', '!=', 'running').executeTakeFirst();
    return Number(r?.n ?? 0);
  }
}
