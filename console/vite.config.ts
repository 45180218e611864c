import { defineConfig } from 'vite';

/**
 * The console, built into hashed assets that the control plane serves at /console (control-plane/src/modules/
 * console/). No inline script: Vite's module preload runs from the entry chunk. The nonce placeholder marks the
 * page's tags and the meta tag the libraries read for the style elements they insert; the gateway puts a fresh
 * nonce in its place for each page it serves (and in the page's Content-Security-Policy).
 */
export default defineConfig({
  base: '/console/',
  root: import.meta.dirname,
  publicDir: false,
  html: { cspNonce: '__SVC_CONSOLE_NONCE__' },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 400,
  },
  server: { proxy: { '/v1': { target: 'http://127.0.0.1:8080', ws: true } } },
});
