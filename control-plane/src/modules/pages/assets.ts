import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** Where the pages load their verification script from (this origin); `?v=` carries the bundle's content hash. */
export const VERIFY_SCRIPT_PATH = '/assets/verify.js';

export interface Bundle {
  code: string;
  /** The same, gzip-compressed, for clients that accept it. */
  gzip: Buffer;
  /** First 16 hex digits of the bundle's sha256: the `?v=` of its URL and its ETag. */
  version: string;
  bytes: number;
}

let bundle: Promise<Bundle> | null = null;

/**
 * The verification script (verify-browser.ts with @noble/curves and @noble/hashes), bundled and minified by
 * esbuild on first use and kept in memory for the life of the process. A failed build is tried again on
 * the next request.
 */
export function verifyScript(): Promise<Bundle> {
  bundle ??= build().catch((e: unknown) => {
    bundle = null;
    throw e;
  });
  return bundle;
}

async function build(): Promise<Bundle> {
  const esbuild = await import('esbuild');
  const out = await esbuild.build({
    entryPoints: [fileURLToPath(new URL('./verify-browser.ts', import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['es2020'],
    minify: true,
    legalComments: 'none',
    charset: 'utf8',
    write: false,
    logLevel: 'silent',
  });
  const code = out.outputFiles[0]!.text;
  return { code, gzip: gzipSync(code, { level: 9 }), version: createHash('sha256').update(code).digest('hex').slice(0, 16), bytes: Buffer.byteLength(code) };
}
