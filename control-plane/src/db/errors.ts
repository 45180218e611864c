/** True for a Postgres unique_violation (SQLSTATE 23505), from pg or PGlite. */
export function isUniqueViolation(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === '23505';
}

/**
 * Runs a transaction again when it lost a race on a unique index (two first sign-ins of one wallet, say):
 * the second attempt sees the winner's row and takes the other branch.
 */
export async function retryOnUniqueViolation<T>(fn: () => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (!isUniqueViolation(e) || i >= attempts) throw e;
    }
  }
}
