import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { html, sendPage } from '../../http/pages.ts';
import { ConsoleAssets, newNonce, pickEncoding, type Asset } from './assets.ts';

export interface ConsoleDeps {
  /** The built console (index.html, assets/); see assets.ts for the default. */
  dir: string | undefined;
  publicUrl: URL;
}

/**
 * The policy of the console's page: scripts and styles of this origin only (no inline script; the few style
 * elements the terminal and chart libraries insert carry the page's nonce), connections to this origin (its
 * WebSocket terminal included), never framed, no forms posted anywhere, no external host at all.
 */
export function consolePolicy(publicUrl: URL, nonce: string): string {
  const ws = `${publicUrl.protocol === 'https:' ? 'wss' : 'ws'}://${publicUrl.host}`;
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self' ${ws}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const Page = z.string().describe('The console (HTML): a single-page app; every client-side route answers the same page.');
const NotBuilt = z.string().describe('An HTML page: the console is not built on this gateway (npm run build:console).');

/**
 * `/console`: the web console, built at build time (console/, Vite) into hashed assets that this gateway serves
 * itself. `/console/assets/<hashed name>` are cached for good; every other path under /console is the app's
 * own page (client-side routes), never cached. Without a build, 503 and a page saying how to make one.
 */
export function consoleRoutes(app: FastifyInstance, d: ConsoleDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const assets = new ConsoleAssets(d.dir);
  const tags = ['console'];
  const pub = { auth: 'public' as const };

  const page = async (reply: FastifyReply) => {
    const nonce = newNonce();
    const text = await assets.index(nonce);
    if (text === null) {
      return sendPage(reply, {
        status: 503,
        title: 'Console not built',
        body: html`<h1>The console is not built</h1><p>This gateway serves the console from its build output, and there is none yet. Build it with <code>npm run build:console</code>, then reload this page.</p>`,
      });
    }
    return reply
      .code(200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', consolePolicy(d.publicUrl, nonce))
      .header('x-frame-options', 'DENY')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'same-origin')
      .header('cache-control', 'no-cache')
      .send(text);
  };

  const sendAsset = (req: FastifyRequest, reply: FastifyReply, a: Asset) => {
    const enc = pickEncoding(req.headers['accept-encoding']);
    reply
      .header('content-type', a.type)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .header('vary', 'accept-encoding');
    if (enc) reply.header('content-encoding', enc);
    // Bytes go out as they are; the schema documents the file.
    return reply.send((enc === 'br' ? a.br : enc === 'gzip' ? a.gzip : a.raw) as unknown as string);
  };

  r.get('/console', { config: pub, schema: { tags, summary: 'The web console (HTML)', produces: ['text/html'], response: { 200: Page, 503: NotBuilt } } }, async (_req, reply) => page(reply));

  r.get(
    '/console/*',
    {
      config: pub,
      schema: {
        tags,
        summary: "The console's hashed assets (cached for good) under /console/assets/, and its client-side routes (the console's page, never cached)",
        params: z.object({ '*': z.string().max(500) }),
        produces: ['text/html', 'text/javascript', 'text/css'],
        response: { 200: Page, 503: NotBuilt },
      },
    },
    async (req, reply) => {
      const path = req.params['*'];
      if (path.startsWith('assets/')) {
        const a = await assets.asset(path.slice('assets/'.length));
        if (!a) throw new ServiceError('not_found', 'No such console asset (a build replaces hashed names: reload /console)');
        return sendAsset(req, reply, a);
      }
      return page(reply);
    },
  );
}
