#!/usr/bin/env node
// Launcher for `svc-node`: runs the built agent (dist/, written by `npm run build`), with stack traces
// mapped to the TypeScript sources.
process.setSourceMapsEnabled(true);
await import('../dist/svc-node.js');
