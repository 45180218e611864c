import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { checkClientData, checkRpId, counterAdvances, knownTransports, readAuthData, readClientData } from './checks.ts';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const reason = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    const s = e as ServiceError;
    return `${s.status} ${s.type} ${String(s.extra.reason ?? s.extra.param)}`;
  }
  return 'passed';
};

describe('passkey response checks', () => {
  it('the signature counter must increase, except for authenticators that keep none (0 forever)', () => {
    expect(counterAdvances(0, 0)).toBe(true); // synced passkeys
    expect(counterAdvances(0, 1)).toBe(true);
    expect(counterAdvances(5, 6)).toBe(true);
    expect(counterAdvances(5, 5)).toBe(false); // a replayed or cloned authenticator
    expect(counterAdvances(5, 4)).toBe(false);
    expect(counterAdvances(5, 0)).toBe(false); // a counter that stopped: not the authenticator registered
  });

  it('client data: a 400 naming the field when unreadable, a 401 naming the check when wrong', () => {
    const good = { type: 'webauthn.get', challenge: 'abc', origin: 'https://example.com' };
    expect(readClientData(b64(good), 'p')).toMatchObject(good);
    expect(reason(() => readClientData('%%%', 'credential.response.clientDataJSON'))).toBe('400 invalid_request credential.response.clientDataJSON');
    expect(reason(() => readClientData(b64({ type: 'webauthn.get' }), 'p'))).toBe('400 invalid_request p');
    expect(reason(() => checkClientData(good, 'webauthn.get', ['https://example.com']))).toBe('passed');
    expect(reason(() => checkClientData(good, 'webauthn.create', ['https://example.com']))).toBe('401 invalid_passkey type');
    expect(reason(() => checkClientData(good, 'webauthn.get', ['https://app.example.com']))).toBe('401 invalid_passkey origin');
    expect(reason(() => checkClientData({ ...good, crossOrigin: true }, 'webauthn.get', ['https://example.com']))).toBe('401 invalid_passkey origin');
  });

  it('authenticator data: the RP id hash and counter', () => {
    const data = Buffer.alloc(37);
    createHash('sha256').update('example.com').digest().copy(data, 0);
    data[32] = 0x05; // user present and verified
    data.writeUInt32BE(7, 33);
    const a = readAuthData(new Uint8Array(data), 'p');
    expect(a.counter).toBe(7);
    expect(a.userVerified).toBe(true);
    expect(reason(() => checkRpId(a.rpIdHash, 'example.com'))).toBe('passed');
    expect(reason(() => checkRpId(a.rpIdHash, 'example.org'))).toBe('401 invalid_passkey rp_id');
    expect(reason(() => readAuthData(new Uint8Array(10), 'credential.response.authenticatorData'))).toBe('400 invalid_request credential.response.authenticatorData');
  });

  it('keeps known transports only, once each', () => {
    expect(knownTransports(['internal', 'usb', 'internal', 'carrier-pigeon'])).toEqual(['internal', 'usb']);
    expect(knownTransports(undefined)).toEqual([]);
  });
});
