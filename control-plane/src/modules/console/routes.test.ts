import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandling } from '../../http/errors.ts';
import { NONCE_PLACEHOLDER } from './assets.ts';
import { consoleRoutes } from './routes.ts';

/** Serving the console's build: the page under its policy, hashed assets cached for good, no build at all. */
const dir = mkdtempSync(join(tmpdir(), 'svc-console-'));
const ASSET = 'index-abc123.js';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(4000))});`;
let built: FastifyInstance;
let missing: FastifyInstance;

async function app(consoleDir: string) {
  const a = Fastify({ routerOptions: { ignoreTrailingSlash: true } });
  a.setValidatorCompiler(validatorCompiler);
  a.setSerializerCompiler(serializerCompiler);
  errorHandling({ drainBytes: 1 << 20, newRequestId: () => 'req_test' }).register(a);
  consoleRoutes(a, { dir: consoleDir, publicUrl: new URL('https://gw.example') });
  await a.ready();
  return a;
}

beforeAll(async () => {
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', ASSET), SCRIPT);
  writeFileSync(join(dir, 'secret.txt'), 'not an asset');
  writeFileSync(join(dir, 'index.html'), `<!doctype html><meta property="csp-nonce" nonce="${NONCE_PLACEHOLDER}"><script type="module" src="/console/assets/${ASSET}" nonce="${NONCE_PLACEHOLDER}"></script>`);
  built = await app(dir);
  missing = await app(join(dir, 'nowhere'));
});
afterAll(async () => {
  await built?.close();
  await missing?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the console routes', () => {
  it('serve the page with a fresh nonce under a strict policy, never cached, at /console and every client-side route', async () => {
    const seen = new Set<string>();
    for (const url of ['/console', '/console/', '/console/keys', '/console/receipts/req_1']) {
      const res = await built.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.headers['x-frame-options']).toBe('DENY');
      const csp = String(res.headers['content-security-policy']);
      const nonce = /'nonce-([^']+)'/.exec(csp)![1]!;
      seen.add(nonce);
      expect(res.body).not.toContain(NONCE_PLACEHOLDER);
      expect(res.body).toContain(`nonce="${nonce}"`);
      expect(csp).toContain("script-src 'self';");
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("connect-src 'self' wss://gw.example");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toMatch(/https?:\/\//);
    }
    expect(seen.size).toBe(4);
  });

  it('serve hashed assets compressed and cached for good; nothing outside assets/', async () => {
    const br = await built.inject({ url: `/console/assets/${ASSET}`, headers: { 'accept-encoding': 'gzip, deflate, br' } });
    expect(br.statusCode).toBe(200);
    expect(br.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(br.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.rawPayload).toString()).toBe(SCRIPT);
    expect(br.rawPayload.length).toBeLessThan(SCRIPT.length / 10);
    const gz = await built.inject({ url: `/console/assets/${ASSET}`, headers: { 'accept-encoding': 'gzip' } });
    expect(gunzipSync(gz.rawPayload).toString()).toBe(SCRIPT);
    const plain = await built.inject({ url: `/console/assets/${ASSET}` });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body).toBe(SCRIPT);
    for (const url of ['/console/assets/nope.js', '/console/assets/..%2Fsecret.txt', '/console/assets/..%2Findex.html', '/console/assets/.hidden.js']) {
      const res = await built.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(res.body, url).not.toContain('not an asset');
    }
    // A path the URL parser resolves out of assets/ is a client-side route: the page, never the file.
    const dotted = await built.inject({ url: '/console/assets/x/../../secret.txt' });
    expect(dotted.body).not.toContain('not an asset');
    expect(dotted.headers['cache-control']).toBe('no-cache');
    expect(JSON.parse((await built.inject({ url: '/console/assets/nope.js' })).body).error.type).toBe('not_found');
  });

  it('answer 503 with a page saying how to build, where the console is not built', async () => {
    for (const url of ['/console', '/console/keys']) {
      const res = await missing.inject({ url });
      expect(res.statusCode, url).toBe(503);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.body).toContain('npm run build:console');
    }
    expect((await missing.inject({ url: `/console/assets/${ASSET}` })).statusCode).toBe(404);
  });
});
