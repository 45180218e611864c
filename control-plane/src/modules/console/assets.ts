import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/**
 * The console's built files (`npm run build:console`: Vite writes index.html and hashed assets/ into
 * console/dist): read from disk, compressed once (brotli and gzip) and kept in memory per file. A hashed asset
 * never changes under its name, so it is cached for good; index.html is read on every request (it is small,
 * and a rebuild shows at once) and carries a fresh CSP nonce each time.
 */

/** console/dist of this checkout, found from this module's own place (control-plane/src/modules/console/). */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../../console/dist/', import.meta.url));

/** The placeholder Vite writes where the page's nonce goes (console/vite.config.ts, html.cspNonce). */
export const NONCE_PLACEHOLDER = '__SVC_CONSOLE_NONCE__';

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

export interface Asset {
  type: string;
  raw: Buffer;
  br: Buffer;
  gzip: Buffer;
}

export type Encoding = 'br' | 'gzip' | null;

/** The best encoding the client takes of the two kept: brotli, else gzip, else none. */
export function pickEncoding(acceptEncoding: string | string[] | undefined): Encoding {
  const a = String(acceptEncoding ?? '');
  if (/\bbr\b/.test(a)) return 'br';
  if (/\bgzip\b/.test(a)) return 'gzip';
  return null;
}

function compress(type: string, raw: Buffer): Asset {
  return {
    type,
    raw,
    br: brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: raw.length } }),
    gzip: gzipSync(raw, { level: 9 }),
  };
}

export class ConsoleAssets {
  private readonly cache = new Map<string, Promise<Asset | null>>();

  constructor(readonly dir: string = DEFAULT_CONSOLE_DIR) {}

  /** Whether a build is there (its index.html). */
  async built(): Promise<boolean> {
    return stat(join(this.dir, 'index.html')).then(
      (s) => s.isFile(),
      () => false,
    );
  }

  /** index.html with `nonce` in place of the placeholder; null when the console is not built. */
  async index(nonce: string): Promise<string | null> {
    const text = await readFile(join(this.dir, 'index.html'), 'utf8').catch(() => null);
    return text === null ? null : text.replaceAll(NONCE_PLACEHOLDER, nonce);
  }

  /** A file under assets/ (`name` as in the URL after /console/assets/); null for anything else or a missing one. */
  asset(name: string): Promise<Asset | null> {
    if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.')) return Promise.resolve(null);
    const path = normalize(join(this.dir, 'assets', name));
    if (!path.startsWith(normalize(join(this.dir, 'assets')) + sep)) return Promise.resolve(null);
    const type = TYPES[extname(name)];
    if (!type) return Promise.resolve(null);
    let got = this.cache.get(name);
    if (!got) {
      got = readFile(path).then(
        (raw) => compress(type, raw),
        () => null,
      );
      // A miss is not kept: a build made after the first request shows up.
      void got.then((a) => a ?? this.cache.delete(name));
      this.cache.set(name, got);
    }
    return got;
  }
}

export const newNonce = () => randomBytes(16).toString('base64');
