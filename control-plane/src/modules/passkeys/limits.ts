// Passkey limits, apart from checks.ts so that the routes (registered whether or not passkeys are configured)
// do not load the WebAuthn library.

/** Most passkeys one account holds (spec, document 3: limits). */
export const MAX_PASSKEYS = 20;

/** A passkey's name: trimmed, 1-64 characters, no control characters (zod refines to this). */
export const NAME_MAX = 64;
// eslint-disable-next-line no-control-regex
export const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
