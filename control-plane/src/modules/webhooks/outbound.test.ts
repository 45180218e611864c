import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { readFigure } from '../attestations/https-source.ts';
import { dial } from '../mcp/upstream.ts';
import { forward } from '../services/delivery.ts';
import { Refused } from './outbound.ts';
import { postDelivery } from './post.ts';
import { isGatewayAddress, type SelfAddress } from './url.ts';

/**
 * The outbound rule every caller-given URL goes through, tried with each of its users (webhook deliveries,
 * MCP upstreams, service endpoints, attestation sources) against real servers on this machine: one stands in
 * for the gateway (its listening address is `self`'s), one is any other server. This machine's host name
 * resolves to one of its own addresses, which no rule on the URL's text sees.
 */
async function server(host: string): Promise<{ port: number; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const s: Server = createServer((req, res) => {
    hits++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"figure":"1"}');
  });
  await new Promise<void>((r) => s.listen(0, host, r));
  return {
    port: (s.address() as AddressInfo).port,
    hits: () => hits,
    close: async () => {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    },
  };
}

let gateway: Awaited<ReturnType<typeof server>>;
let other: Awaited<ReturnType<typeof server>>;
let self: SelfAddress;
const name = hostname();

beforeAll(async () => {
  [gateway, other] = await Promise.all([server('0.0.0.0'), server('0.0.0.0')]);
  self = { publicUrl: new URL('https://gateway.example'), port: 8080, host: '0.0.0.0', allowPrivate: true, listening: [{ address: '0.0.0.0', port: gateway.port }] };
});
afterAll(async () => Promise.all([gateway?.close(), other?.close()]));

const signal = () => AbortSignal.timeout(5000);
const clock = new ManualClock(Date.now());

/** Each user of the rule, dialing `url`: what it reports (a refusal's message, or what it read). */
const users: Record<string, (url: string) => Promise<string>> = {
  'webhook delivery': (url) => postDelivery(new URL(url), {}, '{}', { self, signal: signal() }).then(String, (e: Error) => `${e instanceof Refused ? 'Refused' : 'Error'}: ${e.message}`),
  'MCP upstream': (url) => dial(new URL(url), { method: 'POST', headers: {}, body: '{}', signal: signal() }, self).then((r) => (r.resume(), String(r.statusCode)), (e: Error & { kind?: string }) => `${e.kind}: ${e.message}`),
  'service endpoint': (url) => forward(url, '{}', { slug: 's', callId: 'c', txHash: '0x', payer: '0x' }, { self, timeoutMs: 5000 }).then((d) => (d.ok ? String(d.status) : `${d.error!.type}: ${d.error!.message}`)),
  'attestation source': (url) => readFigure({ url, json_pointer: '/figure' }, { self, clock, timeoutMs: 5000, enabled: true }).then((r) => r.value ?? `error: ${r.exchange.error}`),
};

describe('outbound connections never reach the gateway itself', () => {
  it('knows the gateway\'s own listening addresses, port by port', () => {
    expect(isGatewayAddress('127.0.0.1', gateway.port, self)).toBe(true);
    expect(isGatewayAddress('127.8.9.10', gateway.port, self)).toBe(true); // bound to every interface: all of loopback
    expect(isGatewayAddress('::ffff:127.0.0.1', gateway.port, self)).toBe(true);
    expect(isGatewayAddress('0.0.0.0', gateway.port, self)).toBe(true); // connects to the local host
    expect(isGatewayAddress('127.0.0.1', other.port, self)).toBe(false);
    expect(isGatewayAddress('93.184.216.34', gateway.port, self)).toBe(false);
    const one = { ...self, listening: [{ address: '127.0.0.1', port: 9000 }] };
    expect(isGatewayAddress('127.0.0.1', 9000, one)).toBe(true);
    expect(isGatewayAddress('127.0.0.2', 9000, one)).toBe(true); // loopback counts whole
    expect(isGatewayAddress('10.1.2.3', 9000, one)).toBe(false); // another machine's address, or one the gateway does not listen on
    expect(isGatewayAddress('[::1]', 9000, { ...self, listening: [{ address: '::1', port: 9000 }] })).toBe(true);
  });

  for (const [who, use] of Object.entries(users)) {
    it(`${who}: refused at connect time by the address this machine's host name resolves to; another port of the same name is reached`, async () => {
      const before = gateway.hits();
      const refused = await use(`http://${name}:${gateway.port}/x`);
      expect(refused).toMatch(/reaches this gateway itself/);
      expect(gateway.hits()).toBe(before); // nothing was sent
      // An address literal of this machine is refused before anything is dialed, loopback as well.
      expect(await use(`http://127.0.0.1:${gateway.port}/x`)).toMatch(/points at this gateway/);
      expect(await use(`http://[::ffff:127.0.0.1]:${gateway.port}/x`)).toMatch(/points at this gateway/);
      expect(gateway.hits()).toBe(before);
      // The same name at a port the gateway does not listen on is any other server: reached.
      const hits = other.hits();
      expect(await use(`http://${name}:${other.port}/x`)).not.toMatch(/refused|Refused/);
      expect(other.hits()).toBe(hits + 1);
    });
  }
});
