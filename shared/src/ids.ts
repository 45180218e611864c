import { randomBytes, randomFillSync } from 'node:crypto';

/** Identifier and secret prefixes; they are part of the public interface (spec document 1). */
export const PREFIX = {
  apiKeyId: 'key_',
  apiKeySecret: 'sk-svc_',
  session: 'sess_',
  account: 'acct_',
  nodeKey: 'nk-svc_',
  node: 'node_',
  file: 'file-',
  video: 'vid_',
  call: 'call_',
  request: 'req_',
  oauthClient: 'oauthc_',
  oauthCode: 'oac-svc_',
  oauthAccessToken: 'oat-svc_',
  oauthRefreshToken: 'ort-svc_',
} as const;

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** CSPRNG bytes for ids, drawn 4 KiB at a time (one getrandom call per ~150 ids instead of one per id). */
const pool = Buffer.allocUnsafe(4096);
let used = pool.length;
function randomByte(): number {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  return pool[used++]!;
}

/** Random base36 string of `len` characters; bytes >= 252 are rejected so every character is equally likely. */
export function randomId(len = 24): string {
  let out = '';
  while (out.length < len) {
    const b = randomByte();
    if (b < 252) out += ALPHABET[b % 36]!;
  }
  return out;
}

export function newId(prefix: string, len = 24): string {
  return prefix + randomId(len);
}

/** A secret with a prefix and 256 bits of entropy. */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}
