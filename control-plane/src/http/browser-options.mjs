// esbuild's options for the gateway's page scripts (http/scripts.ts bundles them on first use in development;
// scripts/build.mjs bundles them ahead for production): one set, so both builds give the same bytes.
export const BROWSER_BUNDLE = Object.freeze({
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'silent',
});
