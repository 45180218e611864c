/** The bounds of a Legacy plan (docs/legacy.md states each). */
export const NOTE_MAX_CHARS = 65_536;
export const FILES_MAX = 10;
export const FILE_MAX_BYTES = 1024 * 1024;
export const FILES_TOTAL_MAX_BYTES = 2 * 1024 * 1024;
/** The route's body limit: the files as base64 (4/3 of their bytes), the note and the JSON around them. */
export const CONTENT_BODY_LIMIT = 4 * 1024 * 1024;
export const BENEFICIARIES_MAX = 20;
export const ATTESTERS_MAX = 20;
export const INTERVAL_MIN_SECONDS = 3600;
export const INTERVAL_MAX_SECONDS = 5 * 365 * 86_400;
export const GRACE_MIN_SECONDS = 3600;
export const GRACE_MAX_SECONDS = 365 * 86_400;
export const GRACE_DEFAULT_SECONDS = 7 * 86_400;
/** Every legacy list (plans, attesting, claims) returns at most this many, newest first (spec document 3). */
export const LIST_CAP = 100;
/** The anchor kind of a plan's chained events (ref `<plan_id>:<seq>`, leaf the event hash). */
export const ANCHOR_KIND = 'legacy_event';
/** The prefix of claim tokens (256 random bits after it, base64url). */
export const CLAIM_TOKEN_PREFIX = 'lgc_';

export const CUSTODY =
  'Gateway custody: the note and files are sealed at rest (AES-256-GCM under this gateway\'s seal key) and opened only ' +
  'for a session holding a named beneficiary wallet after release. The gateway can technically read them; it is a sealed ' +
  'custodian, not a vault of keys only you hold. Cancelling destroys every ciphertext; the content-free history stays.';
