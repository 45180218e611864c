import { Readable } from 'node:stream';
import { pack as tarPack, extract as tarExtract } from 'tar-stream';
import { MAX_FILE_BYTES, WORKSPACE, workspacePath } from '@svc/shared';
import type { Box } from './docker.ts';
import { badPath, dockerStatus, notFound, tooLarge } from './errors.ts';

/**
 * Workspace files through Docker's archive API (the workspace is a volume, so the read-only root does not
 * stand in the way): writes are a tar built here, reads and listings parse the tar Docker sends.
 */

const UID = 1000;
const GID = 1000;

export interface WorkspaceFile {
  /** Relative to /workspace, checked by `checkedPath`. */
  rel: string;
  content: Buffer;
}

/** A path inside the workspace (relative, or absolute under /workspace), else `sandbox_bad_path`. */
export function checkedPath(p: string): string {
  const rel = workspacePath(p);
  if (rel === null) throw badPath(`${JSON.stringify(p.slice(0, 200))} is not a path inside ${WORKSPACE}`);
  return rel;
}

/** Decodes a file of a job, refusing bad paths and files over 8 MiB. */
export function decodeFile(path: string, contentB64: string): WorkspaceFile {
  const rel = checkedPath(path);
  if (rel === '') throw badPath(`${WORKSPACE} itself is not a file`);
  if (Math.floor((contentB64.length * 3) / 4) > MAX_FILE_BYTES + 3) throw tooLarge(`${rel} is over ${MAX_FILE_BYTES} bytes`);
  const content = Buffer.from(contentB64, 'base64');
  if (content.length > MAX_FILE_BYTES) throw tooLarge(`${rel} is over ${MAX_FILE_BYTES} bytes`);
  return { rel, content };
}

/** Writes files (and their parent folders, owned by the sandbox user) into the workspace. */
export async function writeFiles(box: Box, files: WorkspaceFile[]): Promise<void> {
  if (files.length === 0) return;
  const p = tarPack();
  const dirs = new Set<string>();
  const mtime = new Date();
  for (const f of files) {
    const parts = f.rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      if (dirs.has(d)) continue;
      dirs.add(d);
      p.entry({ name: `${d}/`, type: 'directory', mode: 0o755, uid: UID, gid: GID, mtime });
    }
    p.entry({ name: f.rel, type: 'file', mode: 0o644, uid: UID, gid: GID, mtime, size: f.content.length }, f.content);
  }
  p.finalize();
  try {
    await box.container.putArchive(Readable.from(p), { path: WORKSPACE });
  } catch (e) {
    if (dockerStatus(e) === 404) throw notFound('the sandbox is gone');
    throw new Error(`writing files failed: ${(e as Error).message}`);
  }
}

interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

// Go's os.FileMode type bits, as Docker reports them.
const MODE_DIR = 2 ** 31;
const MODE_SYMLINK = 2 ** 27;
const MODE_TYPE = MODE_DIR | 2 ** 30 | 2 ** 29 | 2 ** 28 | MODE_SYMLINK | 2 ** 26 | 2 ** 25 | 2 ** 24 | 2 ** 22 | 2 ** 21 | 2 ** 19;

async function stat(box: Box, abs: string): Promise<PathStat> {
  try {
    const res = (await box.container.infoArchive({ path: abs })) as { headers: Record<string, string | undefined>; resume?: () => void };
    res.resume?.();
    const h = res.headers['x-docker-container-path-stat'];
    if (!h) throw new Error('Docker sent no path stat');
    return JSON.parse(Buffer.from(h, 'base64').toString('utf8')) as PathStat;
  } catch (e) {
    if (dockerStatus(e) === 404) throw notFound(`${abs} does not exist`);
    throw e;
  }
}

/** The archive of a path, parsed; `close()` drops the rest of Docker's stream. */
async function archive(box: Box, abs: string): Promise<{ entries: ReturnType<typeof tarExtract>; close: () => void }> {
  let src: NodeJS.ReadableStream;
  try {
    src = await box.container.getArchive({ path: abs });
  } catch (e) {
    if (dockerStatus(e) === 404) throw notFound(`${abs} does not exist`);
    throw e;
  }
  const entries = tarExtract();
  src.pipe(entries as unknown as NodeJS.WritableStream);
  src.on('error', (e: Error) => entries.destroy(e));
  return {
    entries,
    close: () => {
      src.unpipe();
      (src as NodeJS.ReadableStream & { destroy(): void }).destroy();
      entries.destroy();
    },
  };
}

/** Reads one regular file of the workspace (up to 8 MiB). */
export async function readWorkspaceFile(box: Box, path: string): Promise<Buffer> {
  const rel = checkedPath(path);
  const abs = rel === '' ? WORKSPACE : `${WORKSPACE}/${rel}`;
  const st = await stat(box, abs);
  if ((st.mode & MODE_TYPE) !== 0) throw badPath(`${abs} is not a regular file`);
  if (st.size > MAX_FILE_BYTES) throw tooLarge(`${abs} is ${st.size} bytes, over ${MAX_FILE_BYTES}`);
  const ar = await archive(box, abs);
  try {
    for await (const entry of ar.entries) {
      if (entry.header.type !== 'file') {
        entry.resume();
        continue;
      }
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const c of entry as AsyncIterable<Buffer>) {
        n += c.length;
        if (n > MAX_FILE_BYTES) throw tooLarge(`${abs} grew over ${MAX_FILE_BYTES} bytes`);
        chunks.push(c);
      }
      return Buffer.concat(chunks);
    }
  } finally {
    ar.close();
  }
  throw notFound(`${abs} does not exist`);
}

export interface ListEntry {
  name: string;
  type: 'file' | 'dir' | 'link' | 'other';
  size: number;
  mtime: string;
}

const TYPES: Record<string, ListEntry['type']> = { file: 'file', 'contiguous-file': 'file', directory: 'dir', symlink: 'link', link: 'file' };

/**
 * The entries directly under a workspace folder, read from the headers of the folder's archive (no tool in
 * the image is needed, and any file name survives); a file path lists that file alone.
 */
export async function listWorkspace(box: Box, path: string): Promise<{ path: string; entries: ListEntry[] }> {
  const rel = checkedPath(path);
  const abs = rel === '' ? WORKSPACE : `${WORKSPACE}/${rel}`;
  const ar = await archive(box, abs);
  const entries: ListEntry[] = [];
  let root: string | undefined;
  try {
    for await (const entry of ar.entries) {
      const h = entry.header;
      const name = h.name.replace(/\/+$/, '');
      entry.resume();
      const toEntry = (n: string): ListEntry => ({ name: n, type: TYPES[h.type] ?? 'other', size: h.type === 'directory' ? 0 : h.size, mtime: h.mtime.toISOString() });
      if (root === undefined) {
        root = name;
        if (h.type !== 'directory') {
          entries.push(toEntry(name.split('/').pop() ?? name));
          break;
        }
        continue;
      }
      if (!name.startsWith(`${root}/`)) continue;
      const child = name.slice(root.length + 1);
      if (child !== '' && !child.includes('/')) entries.push(toEntry(child));
    }
  } finally {
    ar.close();
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { path: abs, entries };
}
