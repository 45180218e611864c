import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { launchChromium } from './support/browser.ts';
import { openPublicPage, type OpenedPage } from './support/public-page.ts';
import { notarize, notaryAccount } from './support/notary.ts';

/**
 * The public pages of a sealed call (/c/{id}) and of a shared receipt (/r/{request_id}) in a real browser
 * (headless Chromium): each page's own script recovers the receipt's signer and, for a revealed call,
 * recomputes the commitment, and writes its verdict into the page. A genuine record reads valid; one byte
 * changed, in the page's data on its way to the browser or in the stored receipt, reads invalid. Every
 * request the page makes goes to the gateway's own origin.
 */

interface Call { id: string; commitment: string; receipt: { canonical: string } }

let t: TestGateway;
let browser: Browser;
let context: BrowserContext;
let signer: string;

beforeAll(async () => {
  t = await startTestGateway();
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true }); // a phone
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
});
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
});

const open = (path: string, alter?: (html: string) => string) => openPublicPage(context, t.url, path, alter);

function expectOwnOrigin(o: OpenedPage) {
  expect(o.requests.length).toBeGreaterThan(0);
  for (const u of o.requests) expect(new URL(u).origin, u).toBe(t.url);
  expect(o.requests.some((u) => new URL(u).pathname === '/assets/verify.js')).toBe(true);
  expect(o.requests.some((u) => new URL(u).pathname === '/v1/receipts/pubkey')).toBe(true);
}

/** One byte of the signed payload inside the page's data block (the shown payload is HTML-escaped, so untouched). */
const alterPayload = (html: string) => html.replace(/(\\"created_at\\":\\"2)(\d)/, (_m, a: string, d: string) => `${a}${(Number(d) + 1) % 10}`);

describe('the sealed-call page /c/{id}', () => {
  let a: Awaited<ReturnType<typeof t.signIn>>;
  let call: Call;
  const text = 'Rain on Tuesday, <b>not</b> "sun" — 🌧';
  beforeAll(async () => {
    a = await t.signIn();
    call = await a.client.request<Call>('POST', '/v1/calls', { body: { text } });
  });

  it('verifies a committed call in the browser: valid, nothing to recompute yet, text not shown', async () => {
    const o = await open(`/c/${call.id}`);
    expect(o.status).toBe(200);
    expect(o.verdict).toBe('valid');
    expect(o.checks).toEqual({ signature: 'ok', binding: 'ok', commitment: 'absent', anchor: 'absent' });
    expect(await o.page.textContent('#commitment')).toBe(call.commitment);
    expect(await o.page.textContent('#recovered')).toBe(signer.toLowerCase());
    expect(await o.page.textContent('main')).toContain(signer);
    expect(await o.page.textContent('#text-state')).toMatch(/Not revealed/);
    expect(await o.page.textContent('main')).not.toContain('Rain on Tuesday');
    expect(await o.page.getAttribute('meta[name="viewport"]', 'content')).toContain('width=device-width');
    expectOwnOrigin(o);
    await o.page.close();
  });

  it('finds the call invalid when one byte of its signed payload is altered on the way to the browser', async () => {
    const o = await open(`/c/${call.id}`, alterPayload);
    expect(o.verdict).toBe('invalid');
    expect(o.checks.signature).toBe('failed');
    expect(await o.page.textContent('#verdict')).toMatch(/^Invalid/);
    await o.page.close();
  });

  it('after reveal shows text and salt, and recomputes sha256(salt || text) in the browser', async () => {
    await a.client.request('POST', `/v1/calls/${call.id}/reveal`);
    const o = await open(`/c/${call.id}`);
    expect(o.verdict).toBe('valid');
    expect(o.checks).toMatchObject({ signature: 'ok', binding: 'ok', commitment: 'ok' });
    expect(await o.page.textContent('#text')).toBe(text); // caller text shown as text, never markup
    expect(await o.page.locator('#text b').count()).toBe(0);
    expect(await o.page.textContent('#salt')).toMatch(/^[0-9a-f]{64}$/);
    expectOwnOrigin(o);
    await o.page.close();

    // A revealed text altered by one character no longer recomputes the commitment.
    const altered = await open(`/c/${call.id}`, (html) => html.replace('"text":"Rain', '"text":"Pain'));
    expect(altered.verdict).toBe('invalid');
    expect(altered.checks).toMatchObject({ signature: 'ok', commitment: 'failed' });
    await altered.page.close();
  });

  it('shows the anchor once batched (state, root linked to its anchor document) and checks the inclusion proof', async () => {
    await t.gw.leader.runAllOnce();
    const o = await open(`/c/${call.id}`);
    expect(o.verdict).toBe('valid');
    expect(o.checks.anchor).toBe('ok');
    expect(await o.page.getAttribute('#anchor-state', 'data-state')).toBe('not_anchored');
    const href = (await o.page.getAttribute('#anchor-root', 'href'))!;
    expect(href).toMatch(/^\/v1\/anchors\/0x[0-9a-f]{64}$/);
    const doc = (await (await fetch(`${t.url}${href}`)).json()) as { leaves: string[] };
    expect(doc.leaves).toContain(call.commitment);
    await o.page.close();
  });

  it('after withdrawal keeps commitment, receipt and anchor, and shows no text', async () => {
    await a.client.request('POST', `/v1/calls/${call.id}/withdraw`);
    const o = await open(`/c/${call.id}`);
    expect(o.verdict).toBe('valid');
    expect(o.checks).toMatchObject({ signature: 'ok', binding: 'ok', commitment: 'absent', anchor: 'ok' });
    expect(await o.page.textContent('#state')).toBe('withdrawn');
    expect(await o.page.textContent('#text-state')).toMatch(/destroyed/);
    expect(await o.page.content()).not.toContain('Rain on Tuesday');
    expect(await o.page.locator('#salt').count()).toBe(0);
    await o.page.close();
  });
});

describe('the shared-receipt page /r/{request_id}', () => {
  it('verifies a genuine shared receipt valid, and the same receipt with one stored byte changed invalid', async () => {
    const n = await notaryAccount(t);
    const r = await notarize(n.api);
    await n.client.request('POST', `/v1/receipts/${r.id}/share`);
    await t.gw.leader.runAllOnce(); // a notary receipt's hash is anchored: batched now

    const o = await open(`/r/${r.id}`);
    expect(o.status).toBe(200);
    expect(o.verdict).toBe('valid');
    expect(o.checks).toEqual({ signature: 'ok', binding: 'ok', anchor: 'ok' });
    expect(await o.page.textContent('#canonical')).toBe(r.canonical);
    expect(await o.page.textContent('main')).toContain('notary');
    expectOwnOrigin(o);
    await o.page.close();

    await t.gw.database.db
      .updateTable('receipts')
      .set({ payload: r.canonical.replace('"kind":"notary"', '"kind":"notarx"') })
      .where('id', '=', r.id)
      .execute();
    const bad = await open(`/r/${r.id}`);
    expect(bad.verdict).toBe('invalid');
    expect(bad.checks.signature).toBe('failed');
    await bad.page.close();
  });

  it('answers unknown and unshared ids with the same 404 page, and an unknown call with a 404 page', async () => {
    const n = await notaryAccount(t);
    const unshared = await notarize(n.api);
    const body = async (path: string) => {
      const res = await fetch(`${t.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      return (await res.text()).replace(/nonce="[^"]+"/g, 'nonce=""');
    };
    expect(await body(`/r/${unshared.id}`)).toBe(await body('/r/req_unknown'));
    expect(await body('/c/call_unknown')).toMatch(/No sealed call here/);
  });
});

describe('the verification script', () => {
  it('is served from this origin, small, immutable under its content hash', async () => {
    const page = await (await fetch(`${t.url}/c/unknown`)).text();
    expect(page).not.toContain('/assets/verify.js'); // a 404 page loads no script
    const a = await t.signIn();
    const c = await a.client.request<Call>('POST', '/v1/calls', { body: { text: 'x' } });
    const html = await (await fetch(`${t.url}/c/${c.id}`)).text();
    const src = /<script nonce="[^"]+" src="([^"]+)"/.exec(html)![1]!;
    expect(src).toMatch(/^\/assets\/verify\.js\?v=[0-9a-f]{16}$/);
    const res = await fetch(`${t.url}${src}`, { headers: { 'accept-encoding': 'identity' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const code = await res.text();
    const gz = await fetch(`${t.url}${src}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(await gz.text()).toBe(code);
    expect(Buffer.byteLength(code)).toBeLessThan(64 * 1024);
    console.log(`verify.js: ${Buffer.byteLength(code)} bytes`);
    expect((await fetch(`${t.url}/assets/verify.js`)).headers.get('cache-control')).toBe('no-cache');
  });
});
