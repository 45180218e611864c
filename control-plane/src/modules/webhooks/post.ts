import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { isLoopbackHost, isNonPublicAddress } from './url.ts';

/** A delivery refused before anything was sent; its message is the attempt's recorded error. */
export class Refused extends Error {}

/**
 * The lookup a delivery connects with: the host's addresses are resolved once, and refused when any is not
 * public (unless allowed). The connection uses exactly the addresses checked, so a name cannot resolve to a
 * public address for the check and to a private one for the connection (DNS rebinding).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const bad = allowPrivate ? undefined : addresses.find((a) => isNonPublicAddress(a.address));
      if (bad) return callback(new Refused(`refused: ${hostname} resolves to the non-public address ${bad.address} (SVC_WEBHOOK_ALLOW_PRIVATE is off)`), '', 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0];
      if (!first) return callback(new Error(`${hostname} did not resolve`), '', 0);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * POSTs a delivery without following redirects, connecting only to public addresses unless allowed;
 * resolves with the status once the response has been read (its body is discarded).
 */
export function postDelivery(url: URL, headers: Record<string, string>, body: string, o: { allowPrivate: boolean; signal: AbortSignal }): Promise<number> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!o.allowPrivate && (isLoopbackHost(host) || isNonPublicAddress(host))) {
    return Promise.reject(new Refused(`refused: ${host} is not a public address (SVC_WEBHOOK_ALLOW_PRIVATE is off)`));
  }
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup: guardedLookup(o.allowPrivate), signal: o.signal, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
