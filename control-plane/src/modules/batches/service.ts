import type { Kysely, Selectable } from 'kysely';
import { ServiceError, conflict, newId, notFound, type Clock } from '@svc/shared';
import type { BatchesTable, BatchStatus, DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { FilesService } from '../files/service.ts';
import type { BatchUrl } from '../files/jsonl.ts';

export const BATCHES_LIST_CAP = 100;
export const COMPLETION_WINDOWS = { '24h': 24 * 3600 } as const;
export const ACTIVE: BatchStatus[] = ['validating', 'in_progress', 'cancelling'];
/** A batch ends this long before its input's hard TTL, so the lines that never ran can still be listed by custom_id. */
export const INPUT_MARGIN_MS = 60_000;

export type BatchRow = Selectable<BatchesTable>;

export interface BatchInput {
  input_file_id: string;
  endpoint: BatchUrl;
  completion_window: keyof typeof COMPLETION_WINDOWS;
  metadata?: Record<string, string> | null | undefined;
}

const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/** A batch in OpenAI's shape (timestamps in Unix seconds). */
export function batchView(b: BatchRow) {
  return {
    id: b.id,
    object: 'batch' as const,
    endpoint: b.endpoint,
    errors: b.errors ? { object: 'list' as const, data: b.errors } : null,
    input_file_id: b.input_file_id,
    completion_window: b.completion_window,
    status: b.status,
    output_file_id: b.output_file_id,
    error_file_id: b.error_file_id,
    created_at: unix(b.created_at)!,
    in_progress_at: unix(b.in_progress_at),
    expires_at: unix(b.expires_at),
    finalizing_at: unix(b.finalizing_at),
    completed_at: unix(b.completed_at),
    failed_at: unix(b.failed_at),
    expired_at: unix(b.expired_at),
    cancelling_at: unix(b.cancelling_at),
    cancelled_at: unix(b.cancelled_at),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
  };
}
export type BatchView = ReturnType<typeof batchView>;

/**
 * Batches (`/v1/batches`): creation binds the input file (one batch per file) in the same transaction that
 * records the batch; the runner (leader loop) does the rest. Owns `batches` and `batch_lines`.
 */
export class BatchesService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly files: FilesService,
  ) {}

  async create(p: KeyPrincipal, input: BatchInput): Promise<BatchView> {
    if (!p.scopes.includes('inference')) {
      throw new ServiceError('insufficient_scope', 'Batch lines are inference calls: this API key lacks the "inference" scope', { required_scope: 'inference' });
    }
    const now = this.clock.now();
    const id = newId('batch_', 24);
    const row = await this.db.transaction().execute(async (trx) => {
      const file = await this.files.claimForBatch(trx, p.accountId, input.input_file_id, id, input.endpoint);
      // The window ends at 24 h, or just before the input's hard TTL if that is sooner: no line can run past it.
      const expires = new Date(Math.min(now.getTime() + COMPLETION_WINDOWS[input.completion_window] * 1000, file.expiresAt.getTime() - INPUT_MARGIN_MS));
      if (expires.getTime() <= now.getTime()) {
        throw new ServiceError('invalid_request', `input_file_id: the content of ${input.input_file_id} expires within a minute; upload it again`, { param: 'input_file_id' });
      }
      return trx
        .insertInto('batches')
        .values({
          id,
          account_id: p.accountId,
          key_id: p.keyId,
          endpoint: input.endpoint,
          input_file_id: input.input_file_id,
          completion_window: input.completion_window,
          status: 'validating',
          metadata: input.metadata ? JSON.stringify(input.metadata) : null,
          errors: null,
          total: file.lines,
          output_file_id: null,
          error_file_id: null,
          created_at: now,
          expires_at: expires,
          in_progress_at: null,
          finalizing_at: null,
          completed_at: null,
          failed_at: null,
          expired_at: null,
          cancelling_at: null,
          cancelled_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return batchView(row);
  }

  /** Newest first, OpenAI's cursor: `after` is the id of the last batch of the previous page. */
  async list(accountId: string, q: { limit?: number | undefined; after?: string | undefined }) {
    const limit = Math.min(q.limit ?? BATCHES_LIST_CAP, BATCHES_LIST_CAP);
    let query = this.db.selectFrom('batches').selectAll().where('account_id', '=', accountId);
    if (q.after) {
      const a = await this.db.selectFrom('batches').select('n').where('id', '=', q.after).where('account_id', '=', accountId).executeTakeFirst();
      if (!a) throw new ServiceError('invalid_cursor', `after: ${q.after} is not one of your batches; pass the id of the last batch of the previous page`, { param: 'after' });
      query = query.where('n', '<', a.n);
    }
    const rows = await query.orderBy('n', 'desc').limit(limit + 1).execute();
    const data = rows.slice(0, limit).map(batchView);
    return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
  }

  private async owned(accountId: string, id: string): Promise<BatchRow> {
    const row = await this.db.selectFrom('batches').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!row) throw notFound('Batch');
    return row;
  }

  async get(accountId: string, id: string): Promise<BatchView> {
    return batchView(await this.owned(accountId, id));
  }

  /** validating / in_progress -> cancelling; the runner ends it (cancelled) once no line is in flight. Idempotent. */
  async cancel(accountId: string, id: string): Promise<BatchView> {
    const row = await this.db
      .updateTable('batches')
      .set({ status: 'cancelling', cancelling_at: this.clock.now() })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('status', 'in', ['validating', 'in_progress'])
      .returningAll()
      .executeTakeFirst();
    if (row) return batchView(row);
    const cur = await this.owned(accountId, id);
    if (cur.status === 'cancelling' || cur.status === 'cancelled') return batchView(cur);
    throw conflict(`${id} is ${cur.status}; only a validating or in-progress batch can be cancelled`);
  }
}
