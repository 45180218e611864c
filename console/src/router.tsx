import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Client-side routes under /console (the gateway answers every one of them with the console's page). */
export const BASE = '/console';

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((f) => f()));

export function navigate(path: string): void {
  history.pushState(null, '', BASE + path);
  listeners.forEach((f) => f());
  window.scrollTo(0, 0);
}

/** The path after /console ("/" for the overview) and its query. */
export function current(): { path: string; query: URLSearchParams } {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return { path: p === '' ? '/' : p.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) };
}

export function useRoute() {
  const [, setTick] = useState(0);
  useEffect(() => {
    const f = () => setTick((n) => n + 1);
    listeners.add(f);
    return () => listeners.delete(f);
  }, []);
  return current();
}

export function Link(props: { href: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | undefined }) {
  return (
    <a
      href={BASE + props.href}
      class={props.class}
      aria-current={props['aria-current']}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}
