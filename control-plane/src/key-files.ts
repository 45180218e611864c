import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { generatePrivateKey, isPrivateKey, type Hex } from '@svc/shared';

/**
 * Keys that default to "generated once, kept in the data directory": the receipt signer (secp256k1)
 * and the seal key (AES-256). Files are 0600; a configured value always wins.
 */
function loadOrCreate(dataDir: string, file: string, make: () => string, valid: (s: string) => boolean): string {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, file);
  if (existsSync(path)) {
    const v = readFileSync(path, 'utf8').trim();
    if (!valid(v)) throw new Error(`${path} does not hold a valid key; remove it to generate a new one`);
    return v;
  }
  const v = make();
  writeFileSync(path, `${v}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return v;
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
