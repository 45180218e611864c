import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack as tarPack, extract as tarExtract, type Header } from 'tar-stream';
import { WORKSPACE } from '@svc/shared';
import type { Box } from './docker.ts';
import { badPath, dockerStatus, notFound } from './errors.ts';

const SNAPSHOT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const TMP_SUFFIX = '.tmp';

/**
 * Workspace snapshots on this node's disk: `<data_dir>/snapshots/<snapshot_id>.tar` (0600, in a 0700
 * folder), a tar of the workspace's contents with paths relative to it. The control plane owns them (it
 * deletes them); a new session can start from one.
 */
export class Snapshots {
  readonly dir: string;
  /** Temp files being written now; the sweep spares them. */
  private readonly writing = new Set<string>();

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'snapshots');
  }

  path(id: string): string {
    if (!SNAPSHOT_ID.test(id)) throw badPath(`${JSON.stringify(id.slice(0, 140))} is not a snapshot id`);
    return join(this.dir, `${id}.tar`);
  }

  /** Throws `sandbox_not_found` if there is no such snapshot. */
  async check(id: string): Promise<void> {
    const s = await stat(this.path(id)).catch(() => null);
    if (!s?.isFile()) throw notFound(`no snapshot ${id} on this node`);
  }

  async create(box: Box, id: string): Promise<{ bytes: number; sha256: string }> {
    const file = this.path(id);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
    const tmp = `${file}.${randomBytes(4).toString('hex')}${TMP_SUFFIX}`;
    this.writing.add(tmp);
    let src: NodeJS.ReadableStream & { destroy(): void };
    try {
      src = (await box.container.getArchive({ path: WORKSPACE })) as typeof src;
    } catch (e) {
      this.writing.delete(tmp);
      if (dockerStatus(e) === 404) throw notFound('the sandbox is gone');
      throw e;
    }
    const hash = createHash('sha256');
    let bytes = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        hash.update(chunk);
        bytes += chunk.length;
        cb(null, chunk);
      },
    });
    const packed = tarPack();
    const written = pipeline(Readable.from(packed), tap, createWriteStream(tmp, { mode: 0o600, flags: 'wx' }));
    try {
      await rebase(src, packed);
      await written;
      await chmod(tmp, 0o600);
      await rename(tmp, file);
    } catch (e) {
      src.destroy();
      packed.destroy();
      await written.catch(() => undefined);
      await rm(tmp, { force: true });
      throw e;
    } finally {
      this.writing.delete(tmp);
    }
    return { bytes, sha256: hash.digest('hex') };
  }

  /** Unpacks a snapshot into the (new) box's workspace. */
  async restore(box: Box, id: string): Promise<void> {
    await this.check(id);
    await box.container.putArchive(createReadStream(this.path(id)), { path: WORKSPACE });
  }

  async delete(id: string): Promise<{ deleted: boolean }> {
    const file = this.path(id);
    const existed = (await stat(file).catch(() => null)) !== null;
    await rm(file, { force: true });
    return { deleted: existed };
  }

  /** Removes temp files left by an interrupted snapshot (never a snapshot). */
  async sweepTemps(olderThanMs = 10 * 60_000): Promise<number> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    let removed = 0;
    for (const n of names) {
      const p = join(this.dir, n);
      if (!n.endsWith(TMP_SUFFIX) || this.writing.has(p)) continue;
      const s = await stat(p).catch(() => null);
      if (s && Date.now() - s.mtimeMs > olderThanMs) {
        await rm(p, { force: true });
        removed++;
      }
    }
    return removed;
  }
}

/** Re-packs Docker's archive of /workspace (entries `workspace/...`) with paths relative to the workspace. */
async function rebase(src: NodeJS.ReadableStream, out: ReturnType<typeof tarPack>): Promise<void> {
  const ex = tarExtract();
  src.pipe(ex as unknown as NodeJS.WritableStream);
  src.on('error', (e: Error) => ex.destroy(e));
  const strip = (name: string): string => {
    const i = name.indexOf('/');
    return i < 0 ? '' : name.slice(i + 1);
  };
  for await (const entry of ex) {
    const h = entry.header;
    const name = strip(h.name);
    if (name === '' || name === '/') {
      entry.resume();
      continue;
    }
    const header: Header = { ...h, name, linkname: h.type === 'link' ? strip(h.linkname ?? '') : h.linkname };
    await new Promise<void>((resolve, reject) => {
      const sink = out.entry(header, (err) => (err ? reject(err) : resolve()));
      entry.on('data', (c: unknown) => {
        if (!sink.write(c as Buffer)) {
          entry.pause();
          sink.once('drain', () => void entry.resume());
        }
      });
      entry.on('end', () => (sink as unknown as { end(): void }).end());
      entry.on('error', reject);
    });
  }
  out.finalize();
}
