#!/usr/bin/env node
// Launcher for `svc`: runs the built CLI (dist/, written by `npm run build`), with stack traces mapped to
// the TypeScript sources.
process.setSourceMapsEnabled(true);
await import('../dist/svc.js');
