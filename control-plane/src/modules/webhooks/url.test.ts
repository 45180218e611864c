import { describe, expect, it } from 'vitest';
import { Refused, outboundLookup } from './outbound.ts';
import { postDelivery } from './post.ts';
import { isNonPublicAddress } from './url.ts';

describe('isNonPublicAddress', () => {
  it.each([
    '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '127.0.0.1', '127.255.0.9', '169.254.169.254', '100.64.0.1', '0.0.0.0',
    '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd12:3456::1', 'ff02::1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::a9fe:a9fe', '[::1]',
  ])('refuses %s', (a) => expect(isNonPublicAddress(a)).toBe(true));
  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', 'example.com'])('allows %s', (a) => expect(isNonPublicAddress(a)).toBe(false));
});

describe('postDelivery', () => {
  const signal = () => AbortSignal.timeout(5000);
  const self = (allowPrivate: boolean) => ({ publicUrl: new URL('https://gateway.example'), port: 8080, host: '127.0.0.1', allowPrivate });
  it('refuses loopback names and non-public literals unless allowed, before connecting', async () => {
    await expect(postDelivery(new URL('http://localhost:9/x'), {}, '{}', { self: self(false), signal: signal() })).rejects.toThrow(/localhost is not a public address/);
    await expect(postDelivery(new URL('http://[fd00::5]/x'), {}, '{}', { self: self(false), signal: signal() })).rejects.toBeInstanceOf(Refused);
  });

  it('connects only to the addresses it checked: a name that resolves to loopback is refused', async () => {
    // localhost.localdomain style names are caught by name; this one is resolved by the system resolver.
    const lookup = outboundLookup(new URL('http://example.test:9/'), self(false));
    const err = await new Promise<Error | null>((resolve) => lookup('localhost', { all: true }, (e) => resolve(e)));
    expect(err).toBeInstanceOf(Refused);
    expect(err!.message).toMatch(/resolves to the non-public address (127\.0\.0\.1|::1)/);
    const open = outboundLookup(new URL('http://example.test:9/'), self(true));
    const ok = await new Promise<unknown>((resolve) => open('localhost', { all: true }, (e, a) => resolve(e ?? a)));
    expect(Array.isArray(ok)).toBe(true);
  });
});
