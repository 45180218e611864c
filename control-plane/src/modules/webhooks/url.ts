import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { invalid } from '@svc/shared';

export interface SelfAddress {
  /** The gateway's public origin (SVC_PUBLIC_URL). */
  publicUrl: URL;
  /** The port this process listens on. */
  port: number;
  /** The address this process binds (HOST). */
  host: string;
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

const effectivePort = (u: URL) => (u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80);

/**
 * Checks a webhook URL and returns it normalized. Refused (400, param `url`): anything but http(s), URLs
 * with credentials, and URLs that point at the gateway itself (its public origin, or loopback or its own
 * bind address at the port it listens on), which would let a webhook call the gateway's own API.
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
  return u.toString();
}

export function pointsAtGateway(u: URL, self: SelfAddress): boolean {
  if (u.origin === self.publicUrl.origin) return true;
  const port = effectivePort(u);
  if (port !== self.port) return false;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLoopbackHost(host) || host === self.host.toLowerCase()) return true;
  // Bound to every interface: any address of this machine reaches the gateway.
  if (self.host === '0.0.0.0' || self.host === '::') return ownAddresses().has(host);
  return false;
}

function ownAddresses(): Set<string> {
  return new Set(Object.values(networkInterfaces()).flatMap((l) => (l ?? []).map((a) => a.address.toLowerCase())));
}
