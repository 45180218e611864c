import { BrowserScript } from '../../http/scripts.ts';

/** The verdict page's verification script (verify-browser.ts with @noble/curves and @noble/hashes). */
export const verdictScript = new BrowserScript('/assets/verdict.js', new URL('./verify-browser.ts', import.meta.url));
