import { createHash, timingSafeEqual } from 'node:crypto';
import { decodeAttestationObject, decodeClientDataJSON, isoBase64URL, parseAuthenticatorData, type ClientDataJSON } from '@simplewebauthn/server/helpers';
import type { Uint8Array_ } from '@simplewebauthn/server';
import { ServiceError, invalid } from '@svc/shared';
import { MAX_PASSKEYS } from './limits.ts';

export { CONTROL_CHARS, MAX_PASSKEYS, NAME_MAX } from './limits.ts';

/**
 * The checks of a WebAuthn response that name what is wrong, run before the library's full verification
 * (which repeats them): each refusal is a 401 `invalid_passkey` whose `reason` says which check failed.
 */
export type Refusal = 'challenge' | 'type' | 'origin' | 'rp_id' | 'unknown_credential' | 'user_handle' | 'counter' | 'signature' | 'attestation';

export const refuse = (reason: Refusal, message: string) => new ServiceError('invalid_passkey', message, { reason });

/** How long a challenge (and so the browser's ceremony) stays usable. */
export const CHALLENGE_TTL_MS = 5 * 60_000;

/** The authenticator transports the gateway keeps (and hands back to browsers in allow/exclude lists). */
const TRANSPORTS = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);
export const knownTransports = (list: readonly string[] | undefined): string[] => [...new Set((list ?? []).filter((t) => TRANSPORTS.has(t)))];

/** The client data a browser signed over, or a 400 naming the field. */
export function readClientData(b64: string, param: string): ClientDataJSON {
  let cd: ClientDataJSON;
  try {
    cd = decodeClientDataJSON(b64);
  } catch {
    throw invalid(`${param}: not base64url-encoded JSON client data`, param);
  }
  if (typeof cd !== 'object' || cd === null || typeof cd.type !== 'string' || typeof cd.challenge !== 'string' || typeof cd.origin !== 'string') {
    throw invalid(`${param}: client data must carry type, challenge and origin`, param);
  }
  return cd;
}

/** The ceremony type and the page's origin, as the browser wrote them into the signed client data. */
export function checkClientData(cd: ClientDataJSON, type: 'webauthn.create' | 'webauthn.get', origins: readonly string[]): void {
  if (cd.type !== type) throw refuse('type', `The client data is of a "${cd.type}" ceremony, not "${type}"`);
  if (!origins.includes(cd.origin)) {
    throw refuse('origin', `The ceremony ran on ${JSON.stringify(cd.origin)}, not on this gateway's passkey origin (${origins.join(', ')})`);
  }
  if (cd.crossOrigin === true) throw refuse('origin', 'The ceremony ran in a frame embedded by another site; passkeys are used on the top-level page only');
}

/** Decodes a base64url field, or a 400 naming it. */
export function bytesOf(b64: string, param: string): Uint8Array_ {
  if (!isoBase64URL.isBase64URL(b64)) throw invalid(`${param}: not base64url`, param);
  return isoBase64URL.toBuffer(b64);
}

/** The authenticator data inside an attestation object (registration), or a 400 naming the field. */
export function attestedAuthData(attestationObject: string, param: string): Uint8Array_ {
  const bytes = bytesOf(attestationObject, param);
  try {
    return decodeAttestationObject(bytes).get('authData');
  } catch {
    throw invalid(`${param}: not a CBOR attestation object`, param);
  }
}

/** The relying party hash and signature counter of authenticator data, or a 400 naming the field. */
export function readAuthData(authData: Uint8Array_, param: string): { rpIdHash: Uint8Array; counter: number; userVerified: boolean } {
  if (authData.length < 37) throw invalid(`${param}: authenticator data is shorter than 37 bytes`, param);
  try {
    const p = parseAuthenticatorData(authData);
    return { rpIdHash: p.rpIdHash, counter: p.counter, userVerified: p.flags.uv };
  } catch {
    throw invalid(`${param}: malformed authenticator data`, param);
  }
}

/** The authenticator signed for this gateway's relying party id. */
export function checkRpId(rpIdHash: Uint8Array, rpId: string): void {
  const want = createHash('sha256').update(rpId).digest();
  if (rpIdHash.length !== want.length || !timingSafeEqual(rpIdHash, want)) {
    throw refuse('rp_id', `The authenticator signed for another relying party, not ${rpId}`);
  }
}

/**
 * Whether a reported signature counter may follow the stored one. Authenticators that keep no counter
 * (synced passkeys) report 0 every time, and are accepted while both stay 0; otherwise the counter must
 * increase, or the credential may have been cloned.
 */
export function counterAdvances(stored: number, reported: number): boolean {
  return reported > stored || (reported === 0 && stored === 0);
}


