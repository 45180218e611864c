import type { Kysely } from 'kysely';
import type { DB } from '../../control-plane/src/db/schema.ts';

/** The stored chunk rows of an owner's sealed content (db/sealed-chunks.ts), in order. */
export function storedChunks(db: Kysely<DB>, table: 'file_chunks' | 'video_chunks', owner: string) {
  return db.selectFrom(table).selectAll().where('owner_id', '=', owner).orderBy('seq').execute();
}
