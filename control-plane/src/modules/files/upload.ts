import type { Kysely } from 'kysely';
import { ServiceError, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { goneCheck } from '../../db/gone-check.ts';
import type { ChunkWriter, SealedChunks } from '../../db/sealed-chunks.ts';
import { BatchInputCheck, type BatchUrl } from './jsonl.ts';
import type { PartSink } from './multipart.ts';

/** What an upload's file part held, once it is checked and stored. */
export interface ReceivedFile {
  filename: string | null;
  bytes: number;
  chunks: number;
  lines: number;
  endpoints: BatchUrl[];
}

/**
 * The file part of an upload as it arrives: each piece is checked as JSONL (line by line) and stored in
 * sealed chunks under the file's id, each chunk in a short transaction of its own (a slow client holds no
 * database connection between them).
 * A `file_uploads` row, written before the first chunk, says whose the chunks are until the upload ends:
 * `finish` deletes it in the transaction that stores the `files` row; `discard` deletes it with the chunks.
 */
export class FileReceiver implements PartSink {
  private readonly check: BatchInputCheck;
  private readonly writer: ChunkWriter;
  private started: Promise<void> | null = null;
  private ended = false;

  constructor(
    private readonly d: { db: Kysely<DB>; clock: Clock; chunks: SealedChunks; processId: string; maxBytes: number; maxLines: number },
    readonly id: string,
    readonly filename: string | null,
  ) {
    this.check = new BatchInputCheck(d.maxLines);
    // Each chunk goes in with its `file_uploads` row locked: once a sweep has taken the row (this process was
    // taken for gone), no chunk lands; while a chunk goes in, the sweep waits and then deletes it too.
    this.writer = d.chunks.writer(d.db, id, (work) =>
      d.db.transaction().execute(async (trx) => {
        if (!(await trx.selectFrom('file_uploads').select('file_id').where('file_id', '=', id).forUpdate().executeTakeFirst())) throw cleared();
        await work(trx);
      }),
    );
  }

  async write(data: Buffer): Promise<void> {
    if (this.writer.bytes + data.length > this.d.maxBytes) {
      throw new ServiceError('payload_too_large', `file: more than ${this.d.maxBytes} bytes; the limit is ${this.d.maxBytes} bytes`, { param: 'file' });
    }
    this.check.push(data);
    await (this.started ??= this.start());
    await this.writer.write(data); // kept until its chunk is full: the parser never changes a piece it passed on
  }

  end(): void {
    this.ended = true;
  }

  private async start(): Promise<void> {
    await this.d.db.insertInto('file_uploads').values({ file_id: this.id, process_id: this.d.processId, started_at: this.d.clock.now() }).execute();
  }

  /** Checks the end of the file and stores its last chunk; then `commit` in the transaction that stores its row. */
  async finish(): Promise<ReceivedFile> {
    if (!this.ended) throw new Error('the file part has not ended');
    const { lines, endpoints } = this.check.end(); // an empty file is refused here, before anything is written
    await (this.started ??= this.start());
    const { bytes, chunks } = await this.writer.end();
    return { filename: this.filename, bytes, chunks, lines, endpoints };
  }

  /** The chunks are the file's now (inside the transaction that inserts its `files` row). */
  async commit(trx: Kysely<DB>): Promise<void> {
    const r = await trx.deleteFrom('file_uploads').where('file_id', '=', this.id).executeTakeFirst();
    // Swept meanwhile (this process was taken for gone): its chunks may be gone too.
    if (Number(r.numDeletedRows) !== 1) throw cleared();
  }

  /**
   * The upload failed: its chunks and its row go. Not the chunks of a file whose row was stored after all (its
   * transaction committed, but the answer of the commit was lost).
   */
  async discard(): Promise<void> {
    if (!this.started) return;
    await this.started.catch(() => undefined);
    await this.d.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('file_uploads').where('file_id', '=', this.id).execute();
      if (!(await trx.selectFrom('files').select('id').where('id', '=', this.id).executeTakeFirst())) await this.d.chunks.destroy(trx, [this.id]);
    });
  }
}

const cleared = () => new ServiceError('unavailable', 'The upload was cleared while it was received (its process was taken for gone); send it again');

/** How often the leader's loop sweeps (gateway.ts: purge_expired_files). */
export const SWEEP_EVERY_MS = 60_000;

/**
 * Deletes the chunks of uploads whose process left the database (it died mid-way; missing at two sweeps in a
 * row, db/gone-check.ts), 500 at a time. The uploads of live processes are theirs to finish or discard. Each
 * row is taken (deleted) before its chunks go, in one transaction: an upload that stores its file row first
 * keeps its chunks, and one that comes to it after finds its row gone and is refused (FileReceiver.commit).
 */
export class UploadSweeper {
  private readonly gone: (ids: readonly string[]) => Promise<Set<string>>;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly chunks: SealedChunks,
    alive: (ids: readonly string[]) => Promise<Set<string>>,
  ) {
    this.gone = goneCheck(alive, 3 * SWEEP_EVERY_MS);
  }

  /** One sweep; returns how many uploads it swept. */
  async sweep(): Promise<number> {
    const rows = await this.db.selectFrom('file_uploads').select(['file_id', 'process_id']).execute();
    const gone = await this.gone([...new Set(rows.map((r) => r.process_id))]);
    const dead = rows.filter((r) => gone.has(r.process_id)).map((r) => r.file_id);
    let swept = 0;
    for (let i = 0; i < dead.length; i += 500) {
      swept += await this.db.transaction().execute(async (trx) => {
        const taken = (await trx.deleteFrom('file_uploads').where('file_id', 'in', dead.slice(i, i + 500)).returning('file_id').execute()).map((r) => r.file_id);
        await this.chunks.destroy(trx, taken);
        return taken.length;
      });
    }
    return swept;
  }
}
