import { describe, expect, it } from 'vitest';
import { assertPublicTarget, isNonPublicAddress } from './url.ts';

describe('isNonPublicAddress', () => {
  it.each([
    '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '127.0.0.1', '127.255.0.9', '169.254.169.254', '100.64.0.1', '0.0.0.0',
    '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd12:3456::1', 'ff02::1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::a9fe:a9fe', '[::1]',
  ])('refuses %s', (a) => expect(isNonPublicAddress(a)).toBe(true));
  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', 'example.com'])('allows %s', (a) => expect(isNonPublicAddress(a)).toBe(false));
});

describe('assertPublicTarget', () => {
  it('refuses loopback names and non-public literals unless allowed, without a DNS lookup for literals', async () => {
    await expect(assertPublicTarget(new URL('http://localhost:8080/x'), false)).rejects.toThrow(/is this machine/);
    await expect(assertPublicTarget(new URL('http://[fd00::5]/x'), false)).rejects.toThrow(/non-public address fd00::5/);
    await expect(assertPublicTarget(new URL('http://10.9.8.7/x'), true)).resolves.toBeUndefined();
    await expect(assertPublicTarget(new URL('http://93.184.216.34/x'), false)).resolves.toBeUndefined();
  });
});
