import type { ComponentType } from 'preact';
import { lazy, Suspense } from 'preact/compat';
import { useEffect, useState } from 'preact/hooks';
import { api, data, type Res } from './api.ts';
import { Link, useRoute } from './router.tsx';
import { onTabChange, tabGet } from './tab.ts';
import { Loading } from './ui/load.tsx';
import { AccountMenu } from './account.tsx';
import { dropPrefetch, Overview } from './pages/overview.tsx';
import { SignIn } from './pages/signin.tsx';

/** The console's shell: who is signed in, the navigation, and the page of the current route. */
const Keys = lazy(() => import('./pages/keys.tsx').then((m) => m.Keys as ComponentType));
const Usage = lazy(() => import('./pages/usage.tsx').then((m) => m.Usage as ComponentType));
const Receipt = lazy(() => import('./pages/receipt.tsx').then((m) => m.Receipt as ComponentType<{ id: string }>));
const Billing = lazy(() => import('./pages/billing.tsx').then((m) => m.Billing as ComponentType));
const Webhooks = lazy(() => import('./pages/webhooks.tsx').then((m) => m.Webhooks as ComponentType));
const Sandboxes = lazy(() => import('./pages/sandboxes.tsx').then((m) => m.Sandboxes as ComponentType));
const Nodes = lazy(() => import('./pages/nodes.tsx').then((m) => m.Nodes as ComponentType));
const Admin = lazy(() => import('./pages/admin.tsx').then((m) => m.Admin as ComponentType));

export type Me = Res<'/v1/auth/me', 'get'>;

const NAV: Array<[string, string]> = [
  ['/', 'Overview'],
  ['/keys', 'Keys'],
  ['/usage', 'Usage'],
  ['/billing', 'Billing'],
  ['/webhooks', 'Webhooks'],
  ['/sandboxes', 'Sandboxes'],
  ['/nodes', 'Nodes'],
  ['/admin', 'Admin'],
];

export function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [org, setOrg] = useState(tabGet('org_session'));
  const refresh = () =>
    data(api.GET('/v1/auth/me')).then(
      (m) => setMe(m),
      () => {
        dropPrefetch();
        setMe(null);
      },
    );
  useEffect(() => {
    void refresh();
    return onTabChange(() => setOrg(tabGet('org_session')));
  }, [org]);

  const path = route.path;
  const section = '/' + (path.split('/')[1] ?? '');
  const page = (() => {
    if (path === '/admin') return <Admin />;
    if (me === undefined) return <Loading what="your account" />;
    if (me === null) return <SignIn onSignedIn={() => void refresh()} />;
    if (path === '/') return <Overview />;
    if (path === '/keys') return <Keys />;
    if (path === '/usage') return <Usage />;
    if (path.startsWith('/receipts/')) return <Receipt id={decodeURIComponent(path.slice('/receipts/'.length))} />;
    if (path === '/billing') return <Billing />;
    if (path === '/webhooks') return <Webhooks />;
    if (path === '/sandboxes') return <Sandboxes />;
    if (path === '/nodes') return <Nodes />;
    return (
      <section>
        <h1>Not found</h1>
        <p>
          No page here. <Link href="/">Go to the overview</Link>.
        </p>
      </section>
    );
  })();
  useEffect(() => {
    const name = NAV.find(([p]) => p === section)?.[1] ?? (path.startsWith('/receipts/') ? 'Receipt' : 'Console');
    document.title = `${me === null && path !== '/admin' ? 'Sign in' : name} · svc console`;
  }, [path, me]);

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">svc console</span>
        {me && <AccountMenu me={me} onChange={() => void refresh()} />}
      </header>
      <div class="layout">
        <nav aria-label="Console">
          <ul>
            {NAV.filter(([p]) => me || p === '/admin').map(([p, name]) => (
              <li key={p}>
                <Link href={p} aria-current={section === p || (p === '/usage' && section === '/receipts') ? 'page' : undefined}>
                  {name}
                </Link>
              </li>
            ))}
            {!me && me !== undefined && (
              <li>
                <Link href="/" aria-current={section !== '/admin' ? 'page' : undefined}>
                  Sign in
                </Link>
              </li>
            )}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          {/* A new account (an org switched to, or back) shows every page afresh. */}
          <Suspense key={org ?? 'own'} fallback={<Loading what="the page" />}>
            {page}
          </Suspense>
        </main>
      </div>
    </>
  );
}
