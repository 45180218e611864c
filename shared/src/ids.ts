import { randomBytes } from 'node:crypto';

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
} as const;

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** Random base36 string of `len` characters; bytes >= 252 are rejected so every character is equally likely. */
export function randomId(len = 24): string {
  const out: string[] = [];
  while (out.length < len) {
    for (const b of randomBytes(len * 2)) {
      if (b < 252) out.push(ALPHABET[b % 36]!);
      if (out.length === len) break;
    }
  }
  return out.join('');
}

export function newId(prefix: string, len = 24): string {
  return prefix + randomId(len);
}

/** A secret with a prefix and 256 bits of entropy. */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}
