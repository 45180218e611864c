import type { ExpressionBuilder, Kysely, Selectable } from 'kysely';
import { PREFIX, Sealer, ServiceError, conflict, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { BatchesConfig } from '../../config/batches.ts';
import type { DB, FilesTable } from '../../db/schema.ts';
import { ChunkMissing, SealedChunks } from '../../db/sealed-chunks.ts';
import { parseBatchInput, type BatchLine } from './jsonl.ts';
import type { PartSink } from './multipart.ts';
import { FileReceiver, UploadSweeper } from './upload.ts';

export const FILES_LIST_CAP = 200;
const PURGE_CHUNK = 500;

type Row = Omit<Selectable<FilesTable>, 'content'>;
type ContentState = 'available' | 'expired' | 'batch_ended' | 'deleted';

/** Every column but the ciphertext, which only content reads and the batch runner open. */
const META = ['id', 'n', 'account_id', 'key_id', 'purpose', 'filename', 'bytes', 'lines', 'endpoints', 'batch_id', 'created_at', 'expires_at', 'content_destroyed_at', 'content_destroyed_reason', 'deleted_at', 'content_chunks'] as const;
/** Rows whose content is still stored (in chunks, or in the column of files written before chunks). */
const stored = (eb: ExpressionBuilder<DB, 'files'>) => eb.or([eb('content_chunks', 'is not', null), eb('content', 'is not', null)]);
/** What destroying content sets (with when and why). */
const DESTROYED = { content: null, content_chunks: null } as const;

/** The one purpose an upload may have. */
export function checkPurpose(purpose: string): void {
  if (purpose !== 'batch') throw invalid(`purpose: must be "batch" (got "${purpose.slice(0, 40)}")`, 'purpose');
}

export interface FileView {
  id: string;
  object: 'file';
  bytes: number;
  created_at: number;
  filename: string;
  purpose: 'batch' | 'batch_output';
  status: 'processed';
  /** null while the content can be read; otherwise why and when it was destroyed. */
  status_details: string | null;
  expires_at: number;
}

const unix = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * Files (`/v1/files`): batch input uploads and batch output files. Content is sealed at rest (AES-256-GCM
 * under the seal key) in chunks of at most 4 MiB (`file_chunks`, db/sealed-chunks.ts), and has a hard TTL
 * from creation; destroying it (delete, TTL, or the end of the batch it feeds) deletes the chunks in the
 * transaction that records why. Metadata stays listed until the file is deleted. Owns the `files` and
 * `file_chunks` tables.
 */
export class FilesService {
  private readonly chunks: SealedChunks;
  private readonly sweeper: UploadSweeper;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    sealKey: Uint8Array,
    readonly cfg: BatchesConfig,
    /** This process, and which processes are still connected (an upload's chunks are its process's until it ends). */
    private readonly store: { processId: string; alive: (ids: readonly string[]) => Promise<Set<string>> },
  ) {
    this.chunks = new SealedChunks(new Sealer(sealKey), 'file_chunks');
    this.sweeper = new UploadSweeper(db, this.chunks, store.alive);
  }

  private state(r: Pick<Row, 'content_destroyed_reason' | 'expires_at'>, now: Date): ContentState {
    return r.content_destroyed_reason ?? (r.expires_at.getTime() <= now.getTime() ? 'expired' : 'available');
  }

  view(r: Row, now = this.clock.now()): FileView {
    const st = this.state(r, now);
    const when = (r.content_destroyed_at ?? r.expires_at).toISOString();
    const details = st === 'available' ? null : st === 'batch_ended' ? `content destroyed at ${when}: its batch ended` : st === 'expired' ? `content destroyed at ${when}: hard TTL passed` : 'deleted';
    return { id: r.id, object: 'file', bytes: r.bytes, created_at: unix(r.created_at), filename: r.filename, purpose: r.purpose, status: 'processed', status_details: details, expires_at: unix(r.expires_at) };
  }

  /**
   * Receives and stores an upload: `receive` reads the request, passing the file part to the sink it asks for
   * (checked as JSONL line by line and stored in sealed chunks as it arrives, see FileReceiver), and resolves
   * with the purpose. The file's row is stored once everything checked out, with the hard TTL; a failure at
   * any point leaves nothing behind.
   */
  async upload(owner: { accountId: string; keyId: string }, receive: (file: (filename: string | null) => PartSink) => Promise<{ purpose: string }>): Promise<FileView> {
    const id = newId(PREFIX.file, 24);
    let receiver: FileReceiver | null = null;
    try {
      const { purpose } = await receive((filename) => (receiver = new FileReceiver({ ...this.store, db: this.db, clock: this.clock, chunks: this.chunks, maxBytes: this.cfg.fileMaxBytes, maxLines: this.cfg.maxLines }, id, filename)));
      checkPurpose(purpose);
      const r = receiver as FileReceiver | null;
      if (!r) throw invalid('file: required (the JSONL content, sent as a file part)', 'file');
      const f = await r.finish();
      const filename = (f.filename ?? 'upload.jsonl').replace(/[\r\n\u0000]/g, '').slice(0, 255) || 'upload.jsonl';
      const now = this.clock.now();
      const row = await this.db.transaction().execute(async (trx) => {
        await r.commit(trx);
        return trx
          .insertInto('files')
          .values({ ...this.fileRow(id, owner, 'batch', filename, f.bytes, f.chunks, now), lines: f.lines, endpoints: JSON.stringify(f.endpoints) })
          .returning(META)
          .executeTakeFirstOrThrow();
      });
      return this.view(row, now);
    } catch (e) {
      await (receiver as FileReceiver | null)?.discard().catch(() => undefined); // else swept once this process is gone
      throw e;
    }
  }

  /** Uploads whose process died mid-way: their chunks are deleted (leader loop). */
  sweepUploads(): Promise<number> {
    return this.sweeper.sweep();
  }

  /** A new file's row; its content is in `chunks` chunk rows. */
  private fileRow(id: string, owner: { accountId: string; keyId: string | null }, purpose: FilesTable['purpose'], filename: string, bytes: number, chunks: number, now: Date) {
    return {
      id,
      account_id: owner.accountId,
      key_id: owner.keyId,
      purpose,
      filename,
      bytes,
      lines: null,
      endpoints: null,
      content: null,
      content_chunks: chunks,
      batch_id: null,
      created_at: now,
      expires_at: new Date(now.getTime() + this.cfg.fileTtlSeconds * 1000),
      content_destroyed_at: null,
      content_destroyed_reason: null,
      deleted_at: null,
    };
  }

  /** The account's files, newest first, metadata only (at most 200). */
  async list(accountId: string, q: { purpose?: string | undefined; limit?: number | undefined }): Promise<FileView[]> {
    let query = this.db.selectFrom('files').select(META).where('account_id', '=', accountId).where('deleted_at', 'is', null);
    if (q.purpose) query = query.where('purpose', '=', q.purpose as FilesTable['purpose']);
    const rows = await query.orderBy('n', 'desc').limit(Math.min(q.limit ?? FILES_LIST_CAP, FILES_LIST_CAP)).execute();
    const now = this.clock.now();
    return rows.map((r) => this.view(r, now));
  }

  private async owned(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<Row> {
    let q = db.selectFrom('files').select(META).where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null);
    if (lock) q = q.forUpdate();
    const row = await q.executeTakeFirst();
    if (!row) throw notFound('File');
    return row;
  }

  async get(accountId: string, id: string): Promise<FileView> {
    return this.view(await this.owned(this.db, accountId, id));
  }

  /** The raw bytes, a chunk at a time; 410 once the TTL passed (even before the purge loop ran) or the batch it fed ended. */
  content(accountId: string, id: string): Promise<{ filename: string; bytes: number; body: Iterable<Buffer> | AsyncIterable<Buffer> }> {
    return this.readContent(accountId, id, true);
  }

  /**
   * The first chunk is read here, before an answer starts. Content destroyed after its row was read (deleted,
   * its batch ended, purged) is answered as the row then says: the row is read `again` once.
   */
  private async readContent(accountId: string, id: string, again: boolean): Promise<{ filename: string; bytes: number; body: Iterable<Buffer> | AsyncIterable<Buffer> }> {
    const row = await this.db.selectFrom('files').select([...META, 'content']).where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null).executeTakeFirst();
    if (!row) throw notFound('File');
    const st = this.state(row, this.clock.now());
    if (st !== 'available' || (!row.content && row.content_chunks === null)) {
      const why = st === 'batch_ended' ? 'the batch it fed ended' : `its hard TTL passed at ${row.expires_at.toISOString()}`;
      throw new ServiceError('gone', `The content of ${id} is gone: ${why}. Its metadata remains at GET /v1/files/${id}`, { reason: st === 'batch_ended' ? 'batch_ended' : 'expired' });
    }
    try {
      return { filename: row.filename, bytes: row.bytes, body: await this.chunks.open(this.db, id, row.content) };
    } catch (e) {
      if (e instanceof ChunkMissing && again) return this.readContent(accountId, id, false);
      throw e;
    }
  }

  /** Deletes a file: its ciphertext is deleted in the same transaction. The input of a batch that has not ended is refused. */
  async delete(accountId: string, id: string): Promise<{ id: string; object: 'file'; deleted: true }> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      const row = await this.owned(trx, accountId, id, true);
      if (row.purpose === 'batch' && row.batch_id && !row.content_destroyed_reason) {
        throw conflict(`${id} is the input of ${row.batch_id}, which has not ended; cancel the batch first (its end destroys this content)`);
      }
      await trx
        .updateTable('files')
        .set({ ...DESTROYED, deleted_at: now, content_destroyed_at: row.content_destroyed_at ?? now, content_destroyed_reason: row.content_destroyed_reason ?? 'deleted' })
        .where('id', '=', id)
        .execute();
      await this.chunks.destroy(trx, [id]);
      return { id, object: 'file' as const, deleted: true as const };
    });
  }

  /**
   * Binds an input file to a new batch inside the caller's transaction (one batch per file). The file
   * must belong to the account, be a `batch` upload whose lines all call `endpoint`, and still hold its
   * content. Returns its line count and when that content expires (the batch cannot run past it).
   */
  async claimForBatch(trx: Kysely<DB>, accountId: string, fileId: string, batchId: string, endpoint: string): Promise<{ lines: number; expiresAt: Date }> {
    const row = await this.owned(trx, accountId, fileId, true).catch((e: unknown) => {
      throw e instanceof ServiceError && e.type === 'not_found' ? new ServiceError('not_found', `input_file_id: file ${fileId} not found`, { param: 'input_file_id' }) : e;
    });
    const bad = (why: string) => invalid(`input_file_id: ${why}`, 'input_file_id');
    if (row.purpose !== 'batch') throw bad(`${fileId} has purpose ${row.purpose}; a batch reads a file uploaded with purpose "batch"`);
    if (row.batch_id) throw conflict(`input_file_id: ${fileId} already fed ${row.batch_id}; a file feeds one batch (upload it again)`);
    if (this.state(row, this.clock.now()) !== 'available') throw bad(`the content of ${fileId} is gone (hard TTL passed); upload it again`);
    const other = (row.endpoints ?? []).find((u) => u !== endpoint);
    if (other) throw bad(`${fileId} has lines for ${other}, but this batch's endpoint is ${endpoint}; every line's url must equal the endpoint`);
    await trx.updateTable('files').set({ batch_id: batchId }).where('id', '=', fileId).execute();
    return { lines: row.lines ?? 0, expiresAt: row.expires_at };
  }

  /** The parsed lines of a batch input file and when its content expires, or null once its content is gone. */
  async openBatchInput(fileId: string): Promise<{ lines: BatchLine[]; expiresAt: Date; bytes: number } | null> {
    const row = await this.db.selectFrom('files').select(['content', 'content_chunks', 'expires_at', 'content_destroyed_reason']).where('id', '=', fileId).executeTakeFirst();
    if (!row || (!row.content && row.content_chunks === null) || this.state(row, this.clock.now()) !== 'available') return null;
    const content = await this.chunks.readAll(this.db, fileId, row.content).catch((e: unknown) => {
      if (e instanceof ChunkMissing) return null; // destroyed since the row was read
      throw e;
    });
    if (!content) return null;
    // Checked when it was stored: no limit applies again (files stored before the line limit may exceed it).
    return { lines: parseBatchInput(content, Number.MAX_SAFE_INTEGER, Infinity), expiresAt: row.expires_at, bytes: content.length };
  }

  /**
   * A batch output or error file written piece by piece inside the caller's transaction (each 4 MiB is stored
   * as it fills, so no output is ever whole in memory); `close` stores its row with the same hard TTL from
   * now and resolves with its id, or with null when nothing was written (no file).
   */
  outputFile(trx: Kysely<DB>, f: { accountId: string; keyId: string | null; batchId: string; filename: string }): { write(text: string): Promise<void>; close(): Promise<string | null> } {
    const id = newId(PREFIX.file, 24);
    const w = this.chunks.writer(trx, id);
    return {
      write: (text) => w.write(text),
      close: async () => {
        if (w.bytes === 0) return null;
        const { bytes, chunks } = await w.end();
        await trx.insertInto('files').values({ ...this.fileRow(id, { accountId: f.accountId, keyId: f.keyId }, 'batch_output', f.filename, bytes, chunks, this.clock.now()), batch_id: f.batchId }).execute();
        return id;
      },
    };
  }

  /** Destroys a batch input's content when its batch ends (inside the batch's final transaction). */
  async destroyForBatch(trx: Kysely<DB>, fileId: string): Promise<void> {
    const now = this.clock.now();
    await trx.updateTable('files').set({ ...DESTROYED, content_destroyed_at: now, content_destroyed_reason: 'batch_ended' }).where('id', '=', fileId).where(stored).execute();
    await this.chunks.destroy(trx, [fileId]);
  }

  /** Destroys the content of every file past its hard TTL (leader loop). */
  async purgeExpired(): Promise<number> {
    const now = this.clock.now();
    let total = 0;
    for (;;) {
      const { due, done } = await this.db.transaction().execute(async (trx) => {
        const ids = (await trx.selectFrom('files').select('id').where(stored).where('expires_at', '<=', now).limit(PURGE_CHUNK).execute()).map((r) => r.id);
        if (ids.length === 0) return { due: 0, done: 0 };
        // Still stored: a delete or a batch's end that committed since keeps its own reason.
        const purged = await trx.updateTable('files').set({ ...DESTROYED, content_destroyed_at: now, content_destroyed_reason: 'expired' }).where('id', 'in', ids).where(stored).returning('id').execute();
        await this.chunks.destroy(trx, purged.map((r) => r.id));
        return { due: ids.length, done: purged.length };
      });
      total += done;
      if (due < PURGE_CHUNK) return total;
    }
  }
}

