import { parseSiweMessage } from 'viem/siwe';
import { ServiceError, checksumAddress, invalid, isAddress, readDateTime, recoverPersonalMessage } from '@svc/shared';

export const NONCE_TTL_MS = 5 * 60 * 1000;
const CLOCK_SKEW_MS = 60 * 1000;

export interface SiwePolicy {
  publicUrl: URL;
  chainIds: number[];
}

export interface VerifiedSiwe {
  address: string; // lowercase
  nonce: string;
  chainId: number;
}

const siweFail = (message: string) => new ServiceError('invalid_siwe', message);

/**
 * Checks an EIP-4361 message and its EIP-191 signature against this gateway's domain, origin and chains,
 * and the clock. The nonce is returned for the caller to consume atomically: nothing is written here.
 */
export function checkSiwe(message: string, signature: string, policy: SiwePolicy, now: Date): VerifiedSiwe {
  if (message.length > 4096) throw invalid('message: longer than 4096 characters', 'message');
  const m = parseSiweMessage(message);
  const required = ['domain', 'address', 'uri', 'version', 'chainId', 'nonce', 'issuedAt'] as const;
  for (const f of required) {
    if (m[f] === undefined || m[f] === '') throw invalid(`message: not an EIP-4361 message (missing ${f})`, 'message');
  }
  if (m.version !== '1') throw invalid('message: Version must be 1', 'message');
  if (!isAddress(m.address)) throw invalid('message: address is not a 20-byte hex address', 'message');
  if (checksumAddress(m.address) !== m.address) throw invalid('message: address must be EIP-55 checksummed (EIP-4361)', 'message');
  for (const [k, label, d] of [['issuedAt', 'Issued At', m.issuedAt], ['expirationTime', 'Expiration Time', m.expirationTime], ['notBefore', 'Not Before', m.notBefore]] as const) {
    if (d !== undefined && Number.isNaN(d.getTime())) throw invalid(`message: ${k} is not an RFC 3339 date-time`, 'message');
    // The parser reads the text with Date, which moves a day that does not exist (February 30) to another.
    const text = new RegExp(`^${label}: (.*)$`, 'm').exec(message)?.[1];
    const read = text === undefined ? null : readDateTime(text);
    if (read && !read.ok) throw invalid(`message: ${k}: ${read.reason}`, 'message');
  }
  if (!/^[a-zA-Z0-9]{8,}$/.test(m.nonce!)) throw invalid('message: nonce must be at least 8 alphanumeric characters', 'message');

  const origin = policy.publicUrl;
  if (m.domain !== origin.host) throw siweFail(`message domain "${m.domain}" does not match this gateway (${origin.host})`);
  if (m.scheme && `${m.scheme}:` !== origin.protocol) throw siweFail(`message scheme "${m.scheme}" does not match this gateway`);
  let uriOrigin: string;
  try {
    uriOrigin = new URL(m.uri!).origin;
  } catch {
    throw invalid('message: URI is not a valid URI', 'message');
  }
  if (uriOrigin !== origin.origin) throw siweFail(`message URI origin ${uriOrigin} does not match this gateway (${origin.origin})`);
  if (!policy.chainIds.includes(m.chainId!)) {
    throw siweFail(`message Chain ID ${m.chainId} is not accepted here (accepted: ${policy.chainIds.join(', ')})`);
  }

  const t = now.getTime();
  const issued = m.issuedAt!.getTime();
  if (issued > t + CLOCK_SKEW_MS) throw siweFail('message Issued At is in the future');
  if (issued < t - NONCE_TTL_MS - CLOCK_SKEW_MS) throw siweFail('message Issued At is older than the nonce lifetime (5 minutes)');
  if (m.expirationTime && m.expirationTime.getTime() <= t) throw siweFail('message has expired (Expiration Time is past)');
  if (m.notBefore && m.notBefore.getTime() > t + CLOCK_SKEW_MS) throw siweFail('message is not yet valid (Not Before is in the future)');

  const recovered = recoverPersonalMessage(message, signature);
  if (!recovered) throw invalid('signature: not a 65-byte 0x-hex secp256k1 signature', 'signature');
  if (recovered.toLowerCase() !== m.address!.toLowerCase()) {
    throw siweFail('signature was not made by the message address');
  }
  return { address: m.address!.toLowerCase(), nonce: m.nonce!, chainId: m.chainId! };
}
