import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { bareHost, effectivePort, isGatewayAddress, isLoopbackHost, isNonPublicAddress, pointsAtGateway, type SelfAddress } from './url.ts';

/**
 * The rules of every connection the gateway opens to a URL someone gave it: webhook deliveries, MCP upstreams,
 * service endpoints, attestation and price sources, OAuth client metadata documents. Each of them connects
 * through `outboundLookup`, so one rule decides, at connect time, on the address the connection goes to:
 *
 * - never this gateway itself: its public origin, or any address it listens on at that port, however the name
 *   that led there is spelled (a host name of this machine, a name that resolves to one of its addresses);
 * - only public addresses, unless SVC_WEBHOOK_ALLOW_PRIVATE is on;
 * - the connection goes to exactly the addresses checked (a name cannot resolve one way for the check and
 *   another for the connection: DNS rebinding).
 *
 * Node resolves a host name through the `lookup` option and skips it for an IP literal, which is checked
 * here before anything is dialed; together they see every address a connection is made to.
 */

/** A connection refused before anything was sent; its message is what the caller or the attempt's record is told. */
export class Refused extends Error {}

/** Why the URL alone is refused (its origin, or a literal address or loopback name), or null. */
function refusalByUrl(url: URL, self: SelfAddress): string | null {
  if (pointsAtGateway(url, self)) return 'refused: the URL points at this gateway';
  const host = bareHost(url.hostname);
  if (!self.allowPrivate && (isLoopbackHost(host) || isNonPublicAddress(host))) return `refused: ${host} is not a public address (SVC_WEBHOOK_ALLOW_PRIVATE is off)`;
  return null;
}

/**
 * The `lookup` option of one outbound request to `url`, under the rules above. Throws Refused at once for
 * what the URL itself shows (this gateway's origin, an address of its own, or a non-public literal where
 * private addresses are not allowed); the lookup refuses a name whose addresses break a rule, at the port the
 * connection is made to.
 */
export function outboundLookup(url: URL, self: SelfAddress): LookupFunction {
  const why = refusalByUrl(url, self);
  if (why) throw new Refused(why);
  const port = effectivePort(url);
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const bad = self.allowPrivate ? undefined : addresses.find((a) => isNonPublicAddress(a.address));
      if (bad) return callback(new Refused(`refused: ${hostname} resolves to the non-public address ${bad.address} (SVC_WEBHOOK_ALLOW_PRIVATE is off)`), '', 0);
      if (addresses.some((a) => isGatewayAddress(a.address, port, self))) return callback(new Refused(`refused: ${hostname} reaches this gateway itself`), '', 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0];
      if (!first) return callback(new Error(`${hostname} did not resolve`), '', 0);
      callback(null, first.address, first.family);
    });
  };
}
