import type { Kysely } from 'kysely';
import { ServiceError, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
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
 * sealed chunks under the file's id, outside any transaction (a slow client holds no database connection).
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
    this.writer = d.chunks.writer(d.db, id);
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
    if (Number(r.numDeletedRows) !== 1) throw new ServiceError('unavailable', 'The upload was cleared while it was received; send it again');
  }

  /** The upload failed: its chunks and its row go. */
  async discard(): Promise<void> {
    if (!this.started) return;
    await this.started.catch(() => undefined);
    await this.d.db.transaction().execute(async (trx) => {
      await this.d.chunks.destroy(trx, [this.id]);
      await trx.deleteFrom('file_uploads').where('file_id', '=', this.id).execute();
    });
  }
}

/**
 * Deletes the chunks of uploads whose process left the database (it died mid-upload), 500 at a time;
 * returns how many uploads it swept. The uploads of live processes are theirs to finish or discard.
 */
export async function sweepUploads(db: Kysely<DB>, chunks: SealedChunks, alive: (ids: readonly string[]) => Promise<Set<string>>): Promise<number> {
  const rows = await db.selectFrom('file_uploads').select(['file_id', 'process_id']).execute();
  if (rows.length === 0) return 0;
  const live = await alive([...new Set(rows.map((r) => r.process_id))]);
  const dead = rows.filter((r) => !live.has(r.process_id)).map((r) => r.file_id);
  for (let i = 0; i < dead.length; i += 500) {
    const ids = dead.slice(i, i + 500);
    await db.transaction().execute(async (trx) => {
      await chunks.destroy(trx, ids);
      await trx.deleteFrom('file_uploads').where('file_id', 'in', ids).execute();
    });
  }
  return dead.length;
}
