import { BrowserScript } from '../../http/scripts.ts';

/** The public pages' verification script (verify-browser.ts with @noble/curves and @noble/hashes). */
export const verifyScript = new BrowserScript('/assets/verify.js', new URL('./verify-browser.ts', import.meta.url));
