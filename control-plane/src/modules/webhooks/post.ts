import http from 'node:http';
import https from 'node:https';
import { outboundLookup } from './outbound.ts';
import type { SelfAddress } from './url.ts';

/**
 * POSTs a delivery without following redirects, under the outbound rules (never this gateway, public
 * addresses only unless allowed: outbound.ts); resolves with the status once the response has been read
 * (its body is discarded). A refusal rejects with Refused before anything is sent.
 */
export function postDelivery(url: URL, headers: Record<string, string>, body: string, o: { self: SelfAddress; signal: AbortSignal }): Promise<number> {
  let lookup;
  try {
    lookup = outboundLookup(url, o.self);
  } catch (e) {
    return Promise.reject(e);
  }
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup, signal: o.signal, agent: false },
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
