/** A process missing from the database at this many checks in a row is gone (one miss: its LISTEN connection may be reconnecting). */
const GONE_AFTER_MISSES = 2;
/** Checks of leader loops that run every minute or so, further apart than this, are not in a row (a leader's term lost meanwhile). */
export const GONE_CHECK_STALE_MS = 10 * 60_000;

/**
 * A check of which of these processes are gone: missing from the database (`alive`, Database.processesAlive)
 * at GONE_AFTER_MISSES calls in a row (a process not asked about is forgotten; with `staleAfterMs`, calls
 * further apart than that do not count as in a row). Called periodically, so a
 * connection reconnecting is not death. Each check keeps its own count (its calls are its rounds).
 */
export function goneCheck(alive: (ids: readonly string[]) => Promise<Set<string>>, staleAfterMs = Infinity): (ids: readonly string[]) => Promise<Set<string>> {
  const missing = new Map<string, number>();
  let last = -Infinity;
  return async (ids) => {
    // Calls further apart than `staleAfterMs` are not in a row (e.g. a leader's sweeps across a term it lost).
    if (performance.now() - last > staleAfterMs) missing.clear();
    last = performance.now();
    const live = ids.length ? await alive(ids) : new Set<string>();
    const gone = new Set<string>();
    for (const id of [...missing.keys()]) if (!ids.includes(id)) missing.delete(id);
    for (const id of ids) {
      if (live.has(id)) missing.delete(id);
      else {
        const n = (missing.get(id) ?? 0) + 1;
        missing.set(id, n);
        if (n >= GONE_AFTER_MISSES) gone.add(id);
      }
    }
    return gone;
  };
}

/** The claims among `claims` whose process `check` (a goneCheck) finds gone; each claim names its process by `processOf`. */
export async function goneClaims<T>(check: (ids: readonly string[]) => Promise<Set<string>>, claims: readonly T[], processOf: (c: T) => string): Promise<T[]> {
  const gone = await check([...new Set(claims.map(processOf))]);
  return claims.filter((c) => gone.has(processOf(c)));
}
