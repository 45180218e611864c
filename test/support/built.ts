import { fileURLToPath } from 'node:url';

/**
 * The built entry points (scripts/build.mjs), as `npm start`, the units and the package run them. Tests that
 * start a gateway, an agent or the CLI in a child process run these rather than the TypeScript sources
 * through tsx: what production runs, and a child that boots in a fraction of the time. The suite's global
 * setup (test/support/build-setup.ts) builds whatever is older than its sources before the first test.
 */
const at = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

/** `node` arguments that run the built control plane. */
export const GATEWAY_ARGS = ['--enable-source-maps', at('control-plane/dist/main.js')];
/** `node` arguments that run the built node agent (`svc-node`). */
export const AGENT_ARGS = ['--enable-source-maps', at('node-agent/dist/svc-node.js')];
