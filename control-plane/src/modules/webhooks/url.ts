import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { invalid } from '@svc/shared';

export interface SelfAddress {
  /** The gateway's public origin (SVC_PUBLIC_URL). */
  publicUrl: URL;
  /** The port this process listens on. */
  port: number;
  /** The address this process binds (HOST). */
  host: string;
  /** Webhooks may target private, loopback and link-local addresses (SVC_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The addresses and ports this process's server listens on, once it does (before: `host` and `port`). */
  listening?: ReadonlyArray<{ address: string; port: number }>;
}

/** Addresses that are not on the public internet: webhooks stay away from them unless allowed. */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24],
  ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NOT_PUBLIC.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['100::', 64]] as const) NOT_PUBLIC.addSubnet(net, bits, 'ipv6');

/** True for an IP address that is private, loopback, link-local, shared, reserved or multicast (IPv4-mapped and NAT64 forms too). */
export function isNonPublicAddress(address: string): boolean {
  const a = address.toLowerCase().replace(/^\[|\]$/g, '');
  const family = isIP(a);
  if (family === 4) return NOT_PUBLIC.check(a, 'ipv4');
  if (family !== 6) return false;
  const embedded = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(a)?.[1] ?? hexV4(/^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(a));
  if (embedded) return NOT_PUBLIC.check(embedded, 'ipv4');
  return NOT_PUBLIC.check(a, 'ipv6');
}

function hexV4(m: RegExpExecArray | null): string | undefined {
  if (!m) return undefined;
  const hi = parseInt(m[1]!, 16);
  const lo = parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}


const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback']);

/** True for a host that reaches this machine: loopback names and addresses, and the unspecified address. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (LOOPBACK_NAMES.has(h) || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.') || h === '0.0.0.0';
  if (isIP(h) === 6) {
    if (h === '::1' || h === '::') return true;
    const mapped = /^::ffff:(.+)$/.exec(h)?.[1];
    if (mapped) {
      if (isIP(mapped) === 4) return mapped.startsWith('127.') || mapped === '0.0.0.0';
      // WHATWG URL writes a mapped IPv4 address in hex: ::ffff:7f00:1
      const hi = /^([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(mapped)?.[1];
      if (hi) return parseInt(hi, 16) >> 8 === 127 || parseInt(hi, 16) === 0;
    }
  }
  return false;
}

export const effectivePort = (u: URL) => (u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80);

/** A URL's host as an address or name: lowercase, without the brackets of an IPv6 literal or a trailing dot. */
export const bareHost = (hostname: string) => hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');

/**
 * Checks a webhook URL and returns it normalized. Refused (400, param `url`): anything but http(s), URLs
 * with credentials, URLs that point at the gateway itself (its public origin, or loopback or its own
 * bind address at the port it listens on), which would let a webhook call the gateway's own API, and,
 * unless SVC_WEBHOOK_ALLOW_PRIVATE is on, loopback names and non-public IP literals. Names are resolved at
 * each connection, and the connection goes only to the addresses checked (outbound.ts).
 */
export function checkWebhookUrl(raw: string, self: SelfAddress): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw invalid('url: must be an absolute http(s) URL', 'url');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw invalid(`url: must be http or https, not ${u.protocol.replace(/:$/, '')}`, 'url');
  if (u.username || u.password) throw invalid('url: must not carry credentials (user:password@); authenticate deliveries by their signature', 'url');
  if (!u.hostname) throw invalid('url: needs a host', 'url');
  if (pointsAtGateway(u, self)) throw invalid('url: must not point at this gateway', 'url');
  if (!self.allowPrivate && (isLoopbackHost(u.hostname) || isNonPublicAddress(u.hostname))) {
    throw invalid('url: must be a public address, not a private, loopback or link-local one (SVC_WEBHOOK_ALLOW_PRIVATE is off)', 'url');
  }
  return u.toString();
}

/**
 * Whether the URL itself names this gateway: its public origin, its configured host at its port, or an
 * address (or loopback name) that reaches it (isGatewayAddress). A name is resolved at connect time.
 */
export function pointsAtGateway(u: URL, self: SelfAddress): boolean {
  if (u.origin === self.publicUrl.origin) return true;
  const port = effectivePort(u);
  const host = bareHost(u.hostname);
  if (port === self.port && host === bareHost(self.host)) return true;
  return isGatewayAddress(host, port, self);
}

/** Lowercase, without brackets or an IPv6 zone; an IPv4-mapped IPv6 address as its IPv4 address. */
function plainAddress(address: string): string {
  const a = bareHost(address).replace(/%.*$/, '');
  return /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a)?.[1] ?? hexV4(/^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(a)) ?? a;
}

const unspecified = (a: string) => a === '0.0.0.0' || a === '::';

/** Every address of this machine's interfaces (loopback included). */
function localAddresses(): Set<string> {
  return new Set(Object.values(networkInterfaces()).flatMap((l) => (l ?? []).map((x) => plainAddress(x.address))));
}

/** Where this process listens: the addresses its server bound (once it listens), else the configured host and port. */
function listening(self: SelfAddress): ReadonlyArray<{ address: string; port: number }> {
  return self.listening?.length ? self.listening : [{ address: self.host, port: self.port }];
}

/**
 * Whether a connection to `address` (an IP address, or a loopback name) at `port` reaches this gateway
 * process: an address it listens on at that port; where it listens on every interface, any address of this
 * machine; where it listens on loopback, any loopback address (counted whole, to be safe); and the
 * unspecified address, which connects to the local host.
 */
export function isGatewayAddress(address: string, port: number, self: SelfAddress): boolean {
  const raw = plainAddress(address);
  const candidates = isIP(raw) ? [raw] : isLoopbackHost(raw) ? ['127.0.0.1', '::1'] : [];
  if (candidates.length === 0) return false;
  for (const bound of listening(self)) {
    if (bound.port !== port) continue;
    const b = plainAddress(bound.address);
    for (const a of candidates) {
      if (unspecified(a) || a === b) return true;
      if (unspecified(b) && (isLoopbackHost(a) || localAddresses().has(a))) return true;
      if (isLoopbackHost(b) && isLoopbackHost(a)) return true; // bound to loopback (or HOST=localhost): all of loopback at that port counts
    }
  }
  return false;
}
