import { invalid } from '@svc/shared';

/**
 * Handle syntax: 3 to 32 characters of lowercase a-z and 0-9, in groups joined by single hyphens (no hyphen
 * first, last or doubled). Given exactly so: nothing is lowercased or trimmed for the caller.
 */
export const HANDLE_MIN = 3;
export const HANDLE_MAX = 32;
export const HANDLE_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * Names no account may claim: the operator's and the service's own names, names people mistake for staff,
 * and words that are, or may become, literal path segments beside a handle (`/v1/passport/:handle`,
 * `/v1/kya/public/:handle`, `/v1/registry/identity/:handle`, `/v1/post/handles/:handle`). A literal segment
 * takes precedence over a template (spec document 3, versioning rule 6), so a handle spelled like one could
 * never be looked up once that path exists.
 */
export const RESERVED_HANDLES: ReadonlySet<string> = new Set([
  // the service and its operator
  'svc', 'sable', 'gateway', 'admin', 'administrator', 'root', 'system', 'sysadmin', 'operator', 'owner', 'official',
  'staff', 'team', 'support', 'help', 'helpdesk', 'info', 'contact', 'security', 'abuse', 'legal', 'billing',
  'moderator', 'mod', 'mods', 'ops', 'devops', 'status', 'noreply', 'no-reply', 'postmaster', 'hostmaster',
  'webmaster', 'mail', 'email', 'www', 'api', 'app', 'dev', 'docs', 'blog', 'test', 'example', 'localhost',
  // placeholders and names that mean someone else
  'null', 'undefined', 'none', 'nobody', 'anonymous', 'unknown', 'everyone', 'all', 'me', 'self', 'you', 'user',
  'users', 'account', 'accounts', 'agent', 'agents',
  // literal path segments, present or likely beside a handle
  'passport', 'passports', 'proof', 'proofs', 'directory', 'registry', 'identity', 'public', 'kya', 'credentials',
  'handles', 'search', 'new', 'mine', 'manage', 'settings', 'edit', 'claim', 'verify', 'anchors', 'receipts',
  'explorer', 'openapi', 'health', 'healthz', 'readyz', 'metrics', 'auth', 'oauth', 'login', 'logout', 'signin',
  'signup', 'register', 'post', 'inbox', 'outbox',
]);

export const HANDLE_RULES =
  `${HANDLE_MIN}-${HANDLE_MAX} characters: lowercase a-z and 0-9 in groups joined by single hyphens (not first, last or doubled); ` +
  'a reserved name (admin, api, support, www, root, svc, ...) is refused';

/** Why `handle` is not claimable as written, or null when its form is fine. */
export function handleProblem(handle: string): string | null {
  if (handle.length < HANDLE_MIN || handle.length > HANDLE_MAX) return `handle must be ${HANDLE_MIN} to ${HANDLE_MAX} characters long`;
  if (handle !== handle.toLowerCase()) return 'handle must be lowercase';
  if (!HANDLE_PATTERN.test(handle)) return 'handle may hold only a-z, 0-9 and single hyphens between them (not first, last or doubled)';
  if (RESERVED_HANDLES.has(handle)) return `handle "${handle}" is reserved`;
  return null;
}

/** Refuses (400, naming `handle`) a handle that is malformed or reserved. */
export function assertClaimable(handle: string): void {
  const problem = handleProblem(handle);
  if (problem) throw invalid(problem, 'handle');
}
