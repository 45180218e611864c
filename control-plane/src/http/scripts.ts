import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { BROWSER_BUNDLE } from './browser-options.mjs';

/**
 * Browser scripts of the gateway's pages: a TypeScript entry point bundled and minified by esbuild (with the
 * maintained libraries it imports) on first use, kept in memory for the life of the process, and served from
 * this origin under `?v=<content hash>` (immutable). A failed build is tried again on the next request. The
 * production build bundles them ahead (the same options) and the gateway reads the result instead.
 */
export interface Bundle {
  code: string;
  /** The same, gzip-compressed, for clients that accept it. */
  gzip: Buffer;
  /** First 16 hex digits of the bundle's sha256: the `?v=` of its URL. */
  version: string;
  bytes: number;
}

export class BrowserScript {
  private bundle: Promise<Bundle> | null = null;

  /** `entry`: a file URL (`new URL('./x-browser.ts', import.meta.url)`); `path`: where it is served. */
  constructor(
    readonly path: string,
    private readonly entry: URL,
  ) {}

  get(): Promise<Bundle> {
    this.bundle ??= build(this.entry).catch((e: unknown) => {
      this.bundle = null;
      throw e;
    });
    return this.bundle;
  }

  /** The script's URL with its version, for a page's `scriptSrc` (unversioned if it cannot be built now). */
  async src(reply: FastifyReply): Promise<string> {
    const version = await this.get().then(
      (b) => b.version,
      (e: unknown) => {
        reply.log.error({ err: e }, `the script ${this.path} could not be bundled`);
        return null;
      },
    );
    return version ? `${this.path}?v=${version}` : this.path;
  }

  /** Registers the public GET route that serves it. */
  route(app: FastifyInstance, summary: string, tags: string[]): void {
    app.withTypeProvider<ZodTypeProvider>().get(
      this.path,
      {
        config: { auth: 'public' },
        schema: { tags, summary, querystring: z.object({ v: z.string().max(64).optional() }), produces: ['text/javascript'], response: { 200: z.string().describe('JavaScript.') } },
      },
      async (req, reply) => {
        const b = await this.get().catch((e: unknown) => {
          reply.log.error({ err: e }, `the script ${this.path} could not be bundled`);
          throw new ServiceError('unavailable', 'The script is not available; try again shortly');
        });
        reply
          .header('cache-control', req.query.v === b.version ? 'public, max-age=31536000, immutable' : 'no-cache')
          .header('x-content-type-options', 'nosniff')
          .header('vary', 'accept-encoding')
          .type('text/javascript; charset=utf-8');
        // Bytes go out as they are (fastify serializes only objects); the schema documents the script's text.
        if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) return reply.header('content-encoding', 'gzip').send(b.gzip as unknown as string);
        return reply.send(b.code);
      },
    );
  }
}

/** A `.js` entry is the production build's pre-bundled script (scripts/build.mjs): served as it is. */
async function build(entry: URL): Promise<Bundle> {
  if (entry.pathname.endsWith('.js')) return bundleOf(await readFile(entry, 'utf8'));
  const esbuild = await import('esbuild');
  const out = await esbuild.build({ ...BROWSER_BUNDLE, entryPoints: [fileURLToPath(entry)], write: false });
  return bundleOf(out.outputFiles[0]!.text);
}

function bundleOf(code: string): Bundle {
  return { code, gzip: gzipSync(code, { level: 9 }), version: createHash('sha256').update(code).digest('hex').slice(0, 16), bytes: Buffer.byteLength(code) };
}
