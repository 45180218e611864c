import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { generatePrivateKey, isPrivateKey, type Hex } from '@svc/shared';

const hasCode = (e: unknown, ...codes: string[]) => codes.includes((e as { code?: string }).code ?? '');
/** Filesystems without hard links (vfat, some SMB, FUSE and desktop bind mounts) answer link() with these. */
const NO_LINKS = ['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV', 'EMLINK'];

interface KeyFile {
  file: string;
  make: () => string;
  valid: (s: string) => boolean;
  /** What to do about a file that holds no valid key. */
  remedy: string;
}

const SIGNER: KeyFile = {
  file: 'signer.key',
  make: generatePrivateKey,
  valid: isPrivateKey,
  remedy: 'restore it from a backup, or remove it to generate a new key and rotate the signer with SVC_SIGNER_ROTATE_FROM (receipts signed before stay verifiable under the old address)',
};
const SEAL: KeyFile = {
  file: 'seal.key',
  make: () => `0x${randomBytes(32).toString('hex')}`,
  valid: (s) => /^0x[0-9a-f]{64}$/i.test(s),
  remedy: 'restore it from a backup: content sealed under it (files, webhook secrets, batch lines) cannot be opened with another key',
};

/** Test seam: the link call (a filesystem without hard links is simulated by one that throws). */
export const fsOps = { link: linkSync };

function read(path: string, k: KeyFile): string {
  const v = readFileSync(path, 'utf8').trim();
  if (!k.valid(v)) throw new Error(`${path} does not hold a valid key; ${k.remedy}`);
  return v;
}

/**
 * Reads a key that another process may still be writing in place (where there are no hard links): an
 * invalid one is read again for up to 2 s before it is refused. ENOENT is thrown at once.
 */
function readSettled(path: string, k: KeyFile): string {
  for (let i = 0; ; i++) {
    try {
      return read(path, k);
    } catch (e) {
      if (hasCode(e, 'ENOENT') || i >= 40) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50); // boot only: nothing else runs yet
    }
  }
}

/** Writes `text` to a new file (it must not exist) and flushes it to disk; a failed write leaves no file. */
function writeDurably(path: string, text: string): void {
  const fd = openSync(path, 'wx', 0o600);
  let written = false;
  try {
    writeSync(fd, text);
    try {
      fsyncSync(fd);
    } catch (e) {
      if (!hasCode(e, 'EINVAL', 'ENOTSUP', 'EOPNOTSUPP')) throw e; // a filesystem that cannot fsync
    }
    written = true;
  } finally {
    closeSync(fd);
    if (!written) unlinkQuietly(path);
  }
}

function syncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    /* some platforms cannot fsync a directory */
  }
}

/** Temporary key files older than this were left by a process that died while creating a key. */
const STALE_MS = 10 * 60_000;

/**
 * Removes temporary key files left by processes that died while creating a key (they hold key material).
 * Judged by age, not by pid: processes in other containers sharing the data dir may have the same pids.
 */
function sweep(dataDir: string, file: string): void {
  const prefix = `${file}.`;
  try {
    for (const name of readdirSync(dataDir)) {
      if (!name.startsWith(prefix) || !name.endsWith('.tmp')) continue;
      const path = join(dataDir, name);
      if (Date.now() - statSync(path).mtimeMs > STALE_MS) unlinkQuietly(path);
    }
  } catch {
    /* best effort: a key is created without it */
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    /* already gone */
  }
}

/**
 * Keys that default to "generated once, kept in the data directory": the receipt signer (secp256k1)
 * and the seal key (AES-256). Files are 0600; a configured value always wins.
 *
 * Processes that start together on a fresh data dir all end up with the same key: a new key is written
 * whole (and flushed to disk) to a file of this process's own, then hard-linked to its name, which succeeds
 * for one process only (the others read the winner's file). A reader never sees a half-written key. Where
 * the filesystem has no hard links the key is created in place (exclusively), and a reader that finds it
 * incomplete waits for it.
 */
function loadOrCreate(dataDir: string, k: KeyFile): string {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, k.file);
  try {
    return readSettled(path, k);
  } catch (e) {
    if (!hasCode(e, 'ENOENT')) throw e;
  }
  sweep(dataDir, k.file);
  const v = k.make();
  const tmp = `${path}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  writeDurably(tmp, `${v}\n`);
  try {
    fsOps.link(tmp, path);
    syncDir(dataDir);
    return v;
  } catch (e) {
    if (hasCode(e, 'EEXIST')) return read(path, k); // another process created it first
    if (!hasCode(e, ...NO_LINKS)) throw e;
  } finally {
    unlinkQuietly(tmp);
  }
  try {
    writeDurably(path, `${v}\n`);
    syncDir(dataDir);
    return v;
  } catch (e) {
    if (hasCode(e, 'EEXIST')) return readSettled(path, k);
    throw e;
  }
}

export function signerKey(configured: Hex | undefined, dataDir: string): Hex {
  if (configured) {
    if (!isPrivateKey(configured)) throw new Error('SVC_SIGNER_KEY: not a valid secp256k1 private key');
    return configured;
  }
  return loadOrCreate(dataDir, SIGNER) as Hex;
}

export function sealKey(configured: Hex | undefined, dataDir: string): Uint8Array {
  const hex = configured ?? loadOrCreate(dataDir, SEAL);
  return Uint8Array.from(Buffer.from(hex.slice(2), 'hex'));
}
