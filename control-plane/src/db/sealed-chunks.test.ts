import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { Sealer } from '@svc/shared';
import { openDatabase, type Database } from './database.ts';
import { pgliteBytea } from './embedded.ts';
import { migrateToLatest } from './migrate.ts';
import { CHUNK_BYTES, ChunkMissing, SealedChunks, firstRead } from './sealed-chunks.ts';

let database: Database;
const sealer = new Sealer(randomBytes(32));
const chunks = new SealedChunks(sealer, 'file_chunks');
const rows = (owner: string) => database.db.selectFrom('file_chunks').selectAll().where('owner_id', '=', owner).orderBy('seq').execute();
async function all(parts: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const p of parts) out.push(p);
  return Buffer.concat(out);
}
const readBack = (owner: string) => all(chunks.read(database.db, owner));

beforeAll(async () => {
  database = await openDatabase({ memory: true });
  await migrateToLatest(database.db);
});
afterAll(async () => database?.close());

describe('SealedChunks', () => {
  it.each([
    ['empty', 0, 1],
    ['one byte', 1, 1],
    ['exactly one chunk', CHUNK_BYTES, 1],
    ['one byte over', CHUNK_BYTES + 1, 2],
    ['exactly three chunks', 3 * CHUNK_BYTES, 3],
  ])('%s (%i bytes) is stored in %i chunk(s) and read back whole', async (name, size, count) => {
    const owner = `file-${name.replace(/\W/g, '')}`;
    const content = randomBytes(size);
    expect(await chunks.write(database.db, owner, content)).toBe(count);
    const stored = await rows(owner);
    expect(stored.map((r) => [r.seq, r.last])).toEqual(Array.from({ length: count }, (_, i) => [i, i === count - 1]));
    expect(stored.every((r) => r.content.length <= CHUNK_BYTES + 29)).toBe(true);
    expect((await readBack(owner)).equals(content)).toBe(true);
  });

  it('cuts writes of any sizes at the same places', async () => {
    const content = randomBytes(2 * CHUNK_BYTES + 12345);
    const w = chunks.writer(database.db, 'file-pieces');
    for (let at = 0; at < content.length; ) {
      const n = Math.min(content.length - at, 1 + ((at * 7919) % (CHUNK_BYTES / 3)));
      await w.write(content.subarray(at, at + n));
      at += n;
    }
    expect(await w.end()).toEqual({ bytes: content.length, chunks: 3 });
    expect((await readBack('file-pieces')).equals(content)).toBe(true);
    await expect(w.write('more')).rejects.toThrow(/after end/);
  });

  it('content cut short, a chunk moved, or another owner does not read', async () => {
    const content = randomBytes(CHUNK_BYTES + 10);
    await chunks.write(database.db, 'file-cut', content);
    await sql`delete from file_chunks where owner_id = 'file-cut' and seq = 1`.execute(database.db);
    await expect(readBack('file-cut')).rejects.toBeInstanceOf(ChunkMissing); // not the first chunk alone, read as if whole

    await chunks.write(database.db, 'file-a', Buffer.from('a'));
    await chunks.write(database.db, 'file-b', Buffer.from('b'));
    await sql`update file_chunks set content = (select content from file_chunks where owner_id = 'file-a') where owner_id = 'file-b'`.execute(database.db);
    await expect(readBack('file-b')).rejects.toThrow(); // sealed for file-a

    await sql`update file_chunks set last = true where owner_id = 'file-cut' and seq = 0`.execute(database.db);
    await expect(readBack('file-cut')).rejects.toThrow(); // claims to be the end, sealed as not
  });

  it('destroy deletes the chunks; firstRead fails at once on a missing first chunk', async () => {
    await chunks.write(database.db, 'file-gone', Buffer.from('x'));
    await chunks.destroy(database.db, ['file-gone', 'file-unknown']);
    expect(await rows('file-gone')).toEqual([]);
    await expect(firstRead(chunks.read(database.db, 'file-gone'))).rejects.toBeInstanceOf(ChunkMissing);
    await chunks.write(database.db, 'file-here', Buffer.from('here'));
    const body = await firstRead(chunks.read(database.db, 'file-here'));
    expect((await all(body)).toString()).toBe('here');
  });
});

describe('bytea through PGlite', () => {
  it('round-trips as a Buffer, in hex converted natively', async () => {
    const bytes = randomBytes(1000);
    expect(pgliteBytea.serialize(bytes)).toBe(`\\x${bytes.toString('hex')}`);
    expect(pgliteBytea.parse(pgliteBytea.serialize(bytes.subarray(10, 20))).equals(bytes.subarray(10, 20))).toBe(true);
    expect(() => pgliteBytea.serialize('text')).toThrow(/bytea/);
    const { rows: out } = await sql<{ b: Buffer; n: unknown }>`select ${bytes}::bytea as b, 9007199254740991::bigint as n`.execute(database.db);
    expect(Buffer.isBuffer(out[0]!.b) && out[0]!.b.equals(bytes)).toBe(true);
    expect(out[0]!.n).toBe(Number.MAX_SAFE_INTEGER); // the options reach an in-memory PGlite too
  });
});
