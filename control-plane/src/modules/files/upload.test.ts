import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { ManualClock, Sealer } from '@svc/shared';
import { openDatabase, type Database } from '../../db/database.ts';
import { migrateToLatest } from '../../db/migrate.ts';
import { SealedChunks } from '../../db/sealed-chunks.ts';
import { FileReceiver, UploadSweeper } from './upload.ts';

/**
 * The upload's receiver and the sweep of dead processes' uploads, on a real (embedded) database: what each
 * leaves when they meet, in the orders a race can put them.
 */
let database: Database;
const chunks = new SealedChunks(new Sealer(randomBytes(32)), 'file_chunks');
const clock = new ManualClock(new Date('2026-11-25T00:00:00Z'));
const line = (id: string) => `${JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/embeddings', body: { model: 'e', input: 'x' } })}\n`;
let n = 0;

beforeAll(async () => {
  database = await openDatabase({ memory: true });
  await migrateToLatest(database.db);
  await database.db.insertInto('accounts').values({ id: 'acc', created_at: clock.now(), suspended_at: null, suspended_reason: null }).execute();
});
afterAll(async () => database?.close());

const stored = async (id: string) => ({
  upload: (await database.db.selectFrom('file_uploads').select('file_id').where('file_id', '=', id).execute()).length,
  chunks: (await database.db.selectFrom('file_chunks').select('seq').where('owner_id', '=', id).execute()).length,
});

/** A receiver that took a line, as if by a process called `processId`. */
async function received(processId = 'svc_p_dead') {
  const r = new FileReceiver({ db: database.db, clock, chunks, processId, maxBytes: 1 << 20, maxLines: 10 }, `file-test${n++}`, 'in.jsonl');
  await r.write(Buffer.from(line('a')));
  r.end();
  return r;
}

/** Stores the file's row as FilesService.upload does (a bare one: only what these tests look at). */
const commit = (r: FileReceiver) =>
  database.db.transaction().execute(async (trx) => {
    await r.commit(trx);
    await trx
      .insertInto('files')
      .values({ id: r.id, account_id: 'acc', key_id: null, purpose: 'batch', filename: 'in.jsonl', bytes: 1, lines: 1, endpoints: '[]', content: null, content_chunks: 1, batch_id: null, created_at: clock.now(), expires_at: clock.now(), content_destroyed_at: null, content_destroyed_reason: null, deleted_at: null })
      .execute();
  });

describe('FileReceiver and UploadSweeper', () => {
  it('sweeps the upload of a process missing at two sweeps in a row, chunks and row; not at one, not a live one', async () => {
    const dead = await received('svc_p_dead');
    const live = await received('svc_p_live');
    await dead.finish();
    const sweeper = new UploadSweeper(database.db, chunks, async (ids) => new Set(ids.filter((id) => id === 'svc_p_live')));
    expect(await sweeper.sweep()).toBe(0);
    expect(await stored(dead.id)).toEqual({ upload: 1, chunks: 1 });
    expect(await sweeper.sweep()).toBe(1);
    expect(await stored(dead.id)).toEqual({ upload: 0, chunks: 0 });
    expect(await stored(live.id)).toEqual({ upload: 1, chunks: 0 }); // its first chunk is stored at its end
    // Swept meanwhile: the upload cannot be stored (its chunks may be gone).
    await expect(commit(dead)).rejects.toMatchObject({ type: 'unavailable' });
  });

  it('an upload stored between the sweep finding it and taking it keeps its chunks', async () => {
    const r = await received('svc_p_racing');
    await r.finish();
    let round = 0;
    // The sweep's second look at the processes (only this one is missing): meanwhile the upload stores its file row.
    const sweeper = new UploadSweeper(database.db, chunks, async (ids) => {
      if (++round === 2) await commit(r);
      return new Set(ids.filter((id) => id !== 'svc_p_racing'));
    });
    await sweeper.sweep();
    expect(await sweeper.sweep()).toBe(0);
    expect(await stored(r.id)).toEqual({ upload: 0, chunks: 1 });
  });

  it('a receiver swept mid-way stores no further chunk and is refused', async () => {
    const r = new FileReceiver({ db: database.db, clock, chunks, processId: 'svc_p_midway', maxBytes: 32 << 20, maxLines: 1_000_000 }, `file-test${n++}`, 'in.jsonl');
    let k = 0;
    const writeMiB = async (mib: number) => {
      for (let sent = 0; sent < mib << 20; ) {
        const piece = Buffer.from(Array.from({ length: 4096 }, () => line(`l${k++}`)).join('')); // ~400 KB of lines
        await r.write(piece);
        sent += piece.length;
      }
    };
    await writeMiB(5); // past one chunk: the first is stored
    expect(await stored(r.id)).toEqual({ upload: 1, chunks: 1 });
    const sweeper = new UploadSweeper(database.db, chunks, async (ids) => new Set(ids.filter((id) => id !== 'svc_p_midway')));
    await sweeper.sweep();
    expect(await sweeper.sweep()).toBe(1);
    await expect(writeMiB(5)).rejects.toMatchObject({ type: 'unavailable' });
    expect(await stored(r.id)).toEqual({ upload: 0, chunks: 0 });
  });

  it('discard after a commit whose answer was lost keeps the stored file; before, it removes everything', async () => {
    const kept = await received();
    await kept.finish();
    await commit(kept);
    await kept.discard();
    expect(await stored(kept.id)).toEqual({ upload: 0, chunks: 1 });

    const failed = await received();
    await failed.finish();
    await failed.discard();
    expect(await stored(failed.id)).toEqual({ upload: 0, chunks: 0 });
  });
});
