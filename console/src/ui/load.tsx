import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

/** One request's state as a list or a figure shows it: loading, the data, or the error. */
export type Load<T> = { state: 'loading' } | { state: 'ready'; data: T } | { state: 'error'; error: Error };

/** Runs `fn` now and whenever `deps` change; `reload()` runs it again (after an action). */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[] = []): Load<T> & { reload: () => void } {
  const [s, set] = useState<Load<T>>({ state: 'loading' });
  const [n, bump] = useState(0);
  const f = useRef(fn);
  f.current = fn;
  useEffect(() => {
    let live = true;
    f.current().then(
      (data) => live && set({ state: 'ready', data }),
      (error: Error) => live && set({ state: 'error', error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  const reload = useCallback(() => bump((x) => x + 1), []);
  return { ...s, reload };
}

export function Loading(props: { what: string }) {
  return (
    <p class="state loading" role="status">
      Loading {props.what}…
    </p>
  );
}

export function Failed(props: { what: string; error: Error; retry?: () => void }) {
  return (
    <div class="state error" role="alert">
      <p>
        Could not load {props.what}: {props.error.message}
      </p>
      {props.retry && (
        <button type="button" onClick={props.retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/**
 * A list's three states and its content: loading, an error (with a retry), empty (with what to do), or the
 * items. `children` renders the items.
 */
export function ListOf<T>(props: { load: Load<T[]> & { reload: () => void }; what: string; empty: ComponentChildren; children: (items: T[]) => ComponentChildren }) {
  const l = props.load;
  if (l.state === 'loading') return <Loading what={props.what} />;
  if (l.state === 'error') return <Failed what={props.what} error={l.error} retry={l.reload} />;
  if (l.data.length === 0)
    return (
      <p class="state empty" data-empty={props.what}>
        {props.empty}
      </p>
    );
  return <>{props.children(l.data)}</>;
}

/** One object's states (a figure, a detail). */
export function Loaded<T>(props: { load: Load<T> & { reload: () => void }; what: string; children: (data: T) => ComponentChildren }) {
  const l = props.load;
  if (l.state === 'loading') return <Loading what={props.what} />;
  if (l.state === 'error') return <Failed what={props.what} error={l.error} retry={l.reload} />;
  return <>{props.children(l.data)}</>;
}

/** A part of a loaded value (a list inside an answer), in the same state. */
export function mapLoad<T, U>(l: Load<T> & { reload: () => void }, f: (t: T) => U): Load<U> & { reload: () => void } {
  return l.state === 'ready' ? { state: 'ready', data: f(l.data), reload: l.reload } : l;
}
