/**
 * What the console keeps for this tab only (sessionStorage: gone when the tab closes, never shared with other
 * tabs, never localStorage): the admin token, an API key for the key routes (sandboxes, payment requests), and
 * a session switched into an organization. The account's own session is the HttpOnly cookie, which no script
 * can read.
 */
export type TabSecret = 'admin_token' | 'api_key' | 'org_session';

const key = (name: TabSecret) => `svc.console.${name}`;

export function tabGet(name: TabSecret): string | null {
  try {
    return sessionStorage.getItem(key(name));
  } catch {
    return null;
  }
}

export function tabSet(name: TabSecret, value: string | null): void {
  try {
    if (value === null) sessionStorage.removeItem(key(name));
    else sessionStorage.setItem(key(name), value);
  } catch {
    // storage refused (private mode): the value lasts as long as the page
  }
  listeners.forEach((f) => f());
}

const listeners = new Set<() => void>();
export function onTabChange(f: () => void): () => void {
  listeners.add(f);
  return () => listeners.delete(f);
}

export function tabClear(): void {
  (['admin_token', 'api_key', 'org_session'] as const).forEach((n) => tabSet(n, null));
}
