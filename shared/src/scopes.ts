/**
 * API key scopes, one per group of key-authenticated routes. A key created without scopes holds all of them.
 * A key route declares exactly one scope; a key that lacks it gets 403 `insufficient_scope`.
 */
export const SCOPES = {
  inference: 'Chat completions, embeddings, messages, responses, images and videos.',
  files: 'Files and batches.',
  sandboxes: 'Sandbox runs, sessions, workspace files and snapshots.',
  billing: 'Credit position and payment requests.',
  'keys:delegate': 'Mint delegated sub-keys bounded by this key.',
  mcp: 'The remote MCP server and the MCP gateway.',
  memory: 'Memory collections and durable state.',
  agents: 'Agent mailboxes.',
  proofs: 'Notary, sealed calls, attestations, NAV, benchmarks and judge.',
  post: 'Agent Post.',
} as const;

export type Scope = keyof typeof SCOPES;
export const SCOPE_NAMES = Object.keys(SCOPES) as [Scope, ...Scope[]];

/** The scopes a key actually holds: an empty or missing list means every scope. */
export function effectiveScopes(scopes: readonly string[] | null | undefined): Scope[] {
  if (!scopes || scopes.length === 0) return [...SCOPE_NAMES];
  return SCOPE_NAMES.filter((s) => scopes.includes(s));
}
