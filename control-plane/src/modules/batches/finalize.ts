import type { Kysely, Updateable } from 'kysely';
import type { Clock } from '@svc/shared';
import type { BatchesTable, DB } from '../../db/schema.ts';
import type { FilesService } from '../files/service.ts';
import type { BatchLine } from '../files/jsonl.ts';
import type { LineStore } from './lines.ts';
import { RESPONSE_LOST, UNRUN, answered, lineReceipt, notAnswered, type OutputLine } from './output.ts';
import { ACTIVE, type BatchRow } from './service.ts';

export type BatchEnd = 'completed' | 'failed' | 'expired' | 'cancelled';
export interface BatchFailure {
  code: string;
  message: string;
}

/** batch_lines rows read at a time while the output files are written. */
const FINALIZE_PAGE = 500;

const AT = { completed: 'completed_at', failed: 'failed_at', expired: 'expired_at', cancelled: 'cancelled_at' } as const;

/**
 * Ends a batch in one transaction: writes the output file (lines answered 2xx) and the error file (failed
 * requests, answers lost after their charge, and lines that never ran), records the final status, counts
 * and file ids, destroys the input file's content and drops the line rows (their sealed answers and custom
 * ids now live only in the output files; a late write of a stale attempt finds no row). A cancel that landed
 * meanwhile turns `completed` into `cancelled`. Nothing happens if the batch already ended.
 */
export async function finalizeBatch(
  d: { db: Kysely<DB>; clock: Clock; files: FilesService; lines: LineStore },
  b: BatchRow,
  end: BatchEnd,
  input: BatchLine[] | null,
  failure?: BatchFailure,
): Promise<void> {
  await d.db.transaction().execute(async (trx) => {
    const cur = await trx.selectFrom('batches').selectAll().where('id', '=', b.id).forUpdate().executeTakeFirst();
    if (!cur || !ACTIVE.includes(cur.status)) return;
    const final: BatchEnd = cur.status === 'cancelling' ? 'cancelled' : end;
    const now = d.clock.now();
    const unrun = UNRUN[final === 'completed' ? 'failed' : final];
    const meta = { accountId: cur.account_id, keyId: cur.key_id, batchId: cur.id };
    const output = d.files.outputFile(trx, { ...meta, filename: `${cur.id}_output.jsonl` });
    const errorFile = d.files.outputFile(trx, { ...meta, filename: `${cur.id}_error.jsonl` });
    const line = (f: typeof output, o: OutputLine) => f.write(`${JSON.stringify(o)}\n`);
    // Input lines that never ran (no row) go into the error file in line order, between the rows around them.
    let next = 0;
    const unrunBefore = async (lineNo: number) => {
      for (; input && next < input.length && input[next]!.line <= lineNo; next++) {
        const l = input[next]!;
        if (l.line < lineNo) await line(errorFile, notAnswered(l.custom_id, null, unrun.code, unrun.message));
      }
    };
    let completed = 0;
    let failed = 0;
    let listed = 0;
    // A page of rows at a time, in line order: neither the rows nor the files are ever whole in memory.
    for (let after = -1; ; ) {
      const rows = await trx
        .selectFrom('batch_lines as l')
        .leftJoin('receipts as r', 'r.id', 'l.request_id')
        .select(['l.line', 'l.custom_id', 'l.request_id', 'l.status', 'l.status_code', 'l.output', 'r.id as receipt_id', 'r.payload', 'r.hash', 'r.signature'])
        .where('l.batch_id', '=', b.id)
        .where('l.line', '>', after)
        .orderBy('l.line')
        .limit(FINALIZE_PAGE)
        .execute();
      for (const r of rows) {
        listed++;
        await unrunBefore(r.line);
        const receipt = r.receipt_id ? lineReceipt({ id: r.receipt_id, payload: r.payload!, hash: r.hash!, signature: r.signature! }) : null;
        const body = r.output ? d.lines.open(r.request_id, r.output) : null;
        if (r.status === 'running' && !receipt) {
          await line(errorFile, notAnswered(r.custom_id, null, unrun.code, unrun.message)); // never charged: counts as not run
        } else if ((r.status === 'succeeded' || r.status === 'running') && body !== null) {
          completed++;
          await line(output, answered(r.custom_id, r.request_id, r.status_code ?? 200, body, receipt));
        } else {
          failed++;
          if (r.status_code === null || body === null) await line(errorFile, notAnswered(r.custom_id, r.request_id, RESPONSE_LOST.code, RESPONSE_LOST.message, receipt));
          else await line(errorFile, answered(r.custom_id, r.request_id, r.status_code, body, receipt));
        }
      }
      if (rows.length < FINALIZE_PAGE) break;
      after = rows.at(-1)!.line;
    }
    await unrunBefore(Number.MAX_SAFE_INTEGER);
    const errors: BatchFailure[] = failure ? [failure] : [];
    const unlisted = input ? 0 : cur.total - listed;
    if (unlisted > 0) errors.push({ code: 'lines_unlisted', message: `${unlisted} line(s) never ran and cannot be listed by custom_id: the input file's content is gone` });
    const set: Updateable<BatchesTable> = {
      status: final,
      [AT[final]]: now,
      ...(final === 'completed' ? { finalizing_at: now } : {}),
      output_file_id: await output.close(),
      error_file_id: await errorFile.close(),
      completed,
      failed,
      ...(errors.length ? { errors: JSON.stringify(errors.map((e) => ({ code: e.code, message: e.message, param: null, line: null }))) } : {}),
    };
    await trx.updateTable('batches').set(set).where('id', '=', cur.id).execute();
    await d.files.destroyForBatch(trx, cur.input_file_id);
    await trx.deleteFrom('batch_lines').where('batch_id', '=', cur.id).execute();
  });
}
