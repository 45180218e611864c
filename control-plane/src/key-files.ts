import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { generatePrivateKey, isPrivateKey, type Hex } from '@svc/shared';

const exists = (e: unknown, code: string) => (e as { code?: string }).code === code;

function read(path: string, valid: (s: string) => boolean): string {
  const v = readFileSync(path, 'utf8').trim();
  if (!valid(v)) throw new Error(`${path} does not hold a valid key; remove it to generate a new one`);
  return v;
}

/**
 * Keys that default to "generated once, kept in the data directory": the receipt signer (secp256k1)
 * and the seal key (AES-256). Files are 0600; a configured value always wins.
 *
 * Processes that start together on a fresh data dir all end up with the same key: a new key is written
 * whole to a file of this process's own, then hard-linked to its name, which succeeds for one process only
 * (the others read the winner's file). A reader never sees a half-written key.
 */
function loadOrCreate(dataDir: string, file: string, make: () => string, valid: (s: string) => boolean): string {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, file);
  try {
    return read(path, valid);
  } catch (e) {
    if (!exists(e, 'ENOENT')) throw e;
  }
  const v = make();
  const tmp = `${path}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, `${v}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, path);
    return v;
  } catch (e) {
    if (!exists(e, 'EEXIST')) throw e;
    return read(path, valid); // another process created it first
  } finally {
    unlinkSync(tmp);
  }
}

export function signerKey(configured: Hex | undefined, dataDir: string): Hex {
  if (configured) {
    if (!isPrivateKey(configured)) throw new Error('SVC_SIGNER_KEY: not a valid secp256k1 private key');
    return configured;
  }
  return loadOrCreate(dataDir, 'signer.key', generatePrivateKey, isPrivateKey) as Hex;
}

export function sealKey(configured: Hex | undefined, dataDir: string): Uint8Array {
  const hex = configured ?? loadOrCreate(dataDir, 'seal.key', () => `0x${randomBytes(32).toString('hex')}`, (s) => /^0x[0-9a-f]{64}$/i.test(s));
  return Uint8Array.from(Buffer.from(hex.slice(2), 'hex'));
}
