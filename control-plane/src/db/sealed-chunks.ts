import { sql, type Kysely } from 'kysely';
import type { Sealer } from '@svc/shared';

/**
 * Plaintext bytes per chunk row. Each chunk crosses the database driver as one value: node-postgres reads
 * bytea as hex text (twice the bytes in one string) and PGlite sends it that way too, and V8 caps a string
 * at 2^29 characters, so a whole 256 MiB video in one column could be stored but never read back.
 */
export const CHUNK_BYTES = 4 * 1024 * 1024;

/** Runs `work` in a transaction after checking that the writer may still write; throws when it may not. */
export type Fence = (work: (trx: Kysely<any>) => Promise<unknown>) => Promise<void>;

/** A chunk of the content is not there: it was destroyed (or cut short) after its owner's row was read. */
export class ChunkMissing extends Error {}

/** The chunk tables: `(owner_id, seq, last, content)`, one per module that stores large content. */
export type ChunkTable = 'file_chunks' | 'video_chunks';

/**
 * Sealed content stored as numbered chunk rows (`owner_id`, `seq` from 0, `last` on the final one), so that
 * no value and no buffer is larger than CHUNK_BYTES on the way in or out. Each chunk is sealed on its own
 * (AES-256-GCM, aad = owner, position and whether it is the last), so a chunk cannot be moved to another
 * owner or place, and content cut short (its last chunk deleted) fails to read instead of reading short.
 * Empty content is one empty last chunk.
 */
export class SealedChunks {
  constructor(
    private readonly sealer: Sealer,
    private readonly table: ChunkTable,
  ) {}

  private aad(owner: string, seq: number, last: boolean): string {
    return `${owner}:${seq}:${last ? 'last' : 'more'}`;
  }

  /**
   * A writer for the owner's content; call `end()` once everything is written (on `db`, a transaction or not).
   * With `within`, each chunk is stored inside it: a fence that runs the insert in a transaction of its own
   * after checking the writer may still write (e.g. holds its lease), and throws instead when it may not.
   */
  writer(db: Kysely<any>, owner: string, within?: Fence): ChunkWriter {
    const insert = (into: Kysely<any>, seq: number, last: boolean, plain: Buffer) =>
      sql`insert into ${sql.table(this.table)} (owner_id, seq, last, content) values (${owner}, ${seq}, ${last}, ${this.sealer.seal(plain, this.aad(owner, seq, last))})`.execute(into).then(() => undefined);
    return new ChunkWriter((seq, last, plain) => (within ? within((trx) => insert(trx, seq, last, plain)) : insert(db, seq, last, plain)));
  }

  /** Writes content whole; returns how many chunks it took. */
  async write(db: Kysely<any>, owner: string, content: Uint8Array): Promise<number> {
    const w = this.writer(db, owner);
    await w.write(content);
    return (await w.end()).chunks;
  }

  /** The plaintext, one chunk at a time (one query each); throws when a chunk is missing or does not open. */
  async *read(db: Kysely<any>, owner: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const { rows } = await sql<{ last: boolean; content: Uint8Array }>`select last, content from ${sql.table(this.table)} where owner_id = ${owner} and seq = ${seq}`.execute(db);
      const row = rows[0];
      if (!row) throw new ChunkMissing(`${owner}: chunk ${seq} of its content is missing`);
      yield this.sealer.open(row.content, this.aad(owner, seq, row.last));
      if (row.last) return;
    }
  }

  /**
   * The owner's content for an answer: from `legacy`, the whole content sealed in one value (aad = owner) as
   * rows written before chunks hold it, else from its chunks, the first one read now (content destroyed since
   * its row was read fails with ChunkMissing before an answer starts).
   */
  async open(db: Kysely<any>, owner: string, legacy: Uint8Array | null): Promise<Iterable<Buffer> | AsyncIterable<Buffer>> {
    return legacy ? [this.sealer.open(legacy, owner)] : firstRead(this.read(db, owner));
  }

  /** The plaintext whole (for content bounded by a small limit), from `legacy` or the chunks as `open`. */
  async readAll(db: Kysely<any>, owner: string, legacy: Uint8Array | null = null): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const p of await this.open(db, owner, legacy)) parts.push(p);
    return Buffer.concat(parts);
  }

  /** Deletes the chunks of these owners. */
  async destroy(db: Kysely<any>, owners: string[]): Promise<void> {
    if (owners.length === 0) return;
    await sql`delete from ${sql.table(this.table)} where owner_id in (${sql.join(owners)})`.execute(db);
  }
}

/**
 * Reads the first chunk now, so that content destroyed since its row was read fails (ChunkMissing) before an
 * answer starts, and gives back the whole content as one iterable.
 */
export async function firstRead(chunks: AsyncGenerator<Buffer>): Promise<AsyncIterable<Buffer>> {
  const first = await chunks.next();
  return (async function* () {
    if (first.done) return;
    yield first.value;
    yield* chunks;
  })();
}

/**
 * Cuts what is written into CHUNK_BYTES pieces and stores each as it fills. A piece is stored once more
 * bytes follow it (so it is known not to be the last); `end` stores the rest as the last chunk. Bytes are
 * kept by reference until stored: a caller must not change a buffer it has written.
 */
export class ChunkWriter {
  private parts: Buffer[] = [];
  private size = 0;
  private seq = 0;
  private ended = false;
  /** Plaintext bytes written so far. */
  bytes = 0;

  constructor(private readonly put: (seq: number, last: boolean, plain: Buffer) => Promise<void>) {}

  async write(data: Uint8Array | string): Promise<void> {
    if (this.ended) throw new Error('write after end');
    const buf = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (buf.length === 0) return;
    this.parts.push(buf);
    this.size += buf.length;
    this.bytes += buf.length;
    while (this.size > CHUNK_BYTES) await this.put(this.seq++, false, this.take(CHUNK_BYTES));
  }

  /** The first n bytes waiting, copied only when they span several writes. */
  private take(n: number): Buffer {
    const out: Buffer[] = [];
    for (let need = n; need > 0; ) {
      const p = this.parts[0]!;
      if (p.length <= need) {
        out.push(p);
        this.parts.shift();
        need -= p.length;
      } else {
        out.push(p.subarray(0, need));
        this.parts[0] = p.subarray(need);
        need = 0;
      }
    }
    this.size -= n;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /** Stores the last chunk; resolves with the bytes and chunks written. */
  async end(): Promise<{ bytes: number; chunks: number }> {
    if (this.ended) throw new Error('end twice');
    this.ended = true;
    await this.put(this.seq++, true, this.take(this.size));
    return { bytes: this.bytes, chunks: this.seq };
  }
}
