import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { launchChromium } from './support/browser.ts';
import { axeSerious, consoleProblems, downloadedText, ensureConsoleBuilt, injectWallet, screenshots } from './support/console.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * The console of a caller, end to end in Debian's Chromium: a new wallet signs in through the page's EIP-1193
 * provider, creates a key and sees its secret once, makes metered calls with it (the stock openai client against
 * a local OpenAI-compatible upstream) and finds them in the overview's figures and chart, the usage list and a
 * receipt verified in the browser; billing and webhooks; a page of another origin is refused. Every figure is
 * compared with what the API answers for the same session; axe-core runs on every page; screenshots at 1280 and
 * 390 pixels wide go to .ci/out/console/.
 */
const MODEL = 'test-chat';
let t: TestGateway;
let upstream: TestUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let problems: string[];
const wallet = privateKeyToAccount(generatePrivateKey());
let signed: string[];
let session: SvcClient; // the browser's own session, read from its cookie, to ask the API what the console shows
let key: string; // the secret the console showed once

beforeAll(async () => {
  await ensureConsoleBuilt();
  upstream = await startUpstream();
  t = await startTestGateway({
    env: { SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: upstream.url, api_key: 'sk-upstream', models: [{ id: MODEL, input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000 }] }]) },
  });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: 'America/New_York' });
  signed = await injectWallet(context, wallet);
  page = await context.newPage();
  problems = consoleProblems(page);
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await upstream?.close();
});

const url = (path = '') => `${t.url}/console${path}`;
/** Goes to a page through the console's own navigation (a client-side route), and waits for its heading. */
async function open(link: string, heading: string) {
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: link, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}
async function expectAccessible(name: string) {
  await page.locator('.state.loading').first().waitFor({ state: 'detached' }).catch(() => undefined);
  expect(await axeSerious(page), name).toEqual([]);
  await screenshots(page, name);
}
const texts = (sel: string) => page.locator(sel).allTextContents();

describe('the console of a caller', () => {
  it('signs a new wallet in through the page (SIWE), keeping no token where scripts read', async () => {
    await page.goto(url());
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await expectAccessible('sign-in');
    await page.getByRole('button', { name: 'Sign in with a wallet' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(signed).toHaveLength(1);
    expect(signed[0]).toContain(`${new URL(t.url).host} wants you to sign in with your Ethereum account:\n${wallet.address}\n`);
    const cookie = (await context.cookies()).find((c) => c.name === 'svc_session')!;
    expect(cookie.httpOnly).toBe(true);
    expect(await page.evaluate(() => [(globalThis as any).document.cookie, (globalThis as any).localStorage.length, JSON.stringify((globalThis as any).sessionStorage)])).toEqual(['', 0, '{}']);
    session = new SvcClient({ baseUrl: t.url, credential: { kind: 'session', token: cookie.value } });
    const me = await session.request<{ account_id: string; wallet_address: string }>('GET', '/v1/auth/me');
    expect(me.wallet_address.toLowerCase()).toBe(wallet.address.toLowerCase());
    await t.gw.services.metering.credit(me.account_id, 5_000_000, 'grant', `console-${me.account_id}`);
    await page.reload();
    await page.locator('[data-figure=balance]').waitFor();
    expect(await page.textContent('[data-figure=balance]')).toBe('$5.000000');
    expect(await page.locator('[data-empty="the latest calls"]').count()).toBe(1);
    await expectAccessible('overview-empty');
  });

  it('creates a key by keyboard and shows its secret once', async () => {
    await open('Keys', 'Keys');
    await page.focus('#key-name');
    await page.keyboard.type('console demo');
    await page.keyboard.press('Tab');
    await page.keyboard.type('2.5'); // the spend cap, in dollars
    await page.locator('#key-scope-inference').focus();
    await page.keyboard.press('Space');
    await page.getByRole('button', { name: 'Create key' }).focus();
    await page.keyboard.press('Enter');
    const secret = page.locator('[data-secret]');
    await secret.waitFor();
    key = (await secret.textContent())!.trim();
    expect(key).toMatch(/^sk-svc_/);
    await expectAccessible('keys-secret');
    await page.getByRole('button', { name: 'I saved it' }).click();
    await expect.poll(() => page.locator('[data-secret]').count()).toBe(0);
    const [listed] = await session.request<Array<{ id: string; name: string; prefix: string; scopes: string[]; spend_cap_micro_usd: number }>>('GET', '/v1/keys');
    expect(listed).toMatchObject({ name: 'console demo', scopes: ['inference'], spend_cap_micro_usd: 2_500_000 });
    await page.locator(`[data-key="${listed!.id}"]`).waitFor();
    // Nowhere on the page, and not after a reload either.
    await page.reload();
    await page.locator(`[data-key="${listed!.id}"]`).waitFor();
    expect(await page.content()).not.toContain(key);
    expect(key.startsWith(listed!.prefix)).toBe(true);
  });

  it('shows metered calls in the overview chart, the usage list and a receipt verified in the browser, every figure as the API gives it', async () => {
    const openai = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: key });
    for (const text of ['Hello', 'How much is 6*7?', 'Thanks']) await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: text }] });
    const usage = await session.request<{ daily: Array<{ date: string; cost_micro_usd: number; events: number }>; by_model: Array<{ model: string; cost_micro_usd: number }>; by_key: Array<{ key_id: string; cost_micro_usd: number }>; events: Array<{ id: string; cost_micro_usd: number; receipt_id: string }> }>('GET', '/v1/usage');
    const balance = await session.request<{ balance_micro_usd: number; held_micro_usd: number; spendable_micro_usd: number }>('GET', '/v1/billing/balance');
    expect(usage.events).toHaveLength(3);

    await open('Overview', 'Overview');
    await page.locator('[data-chart=daily][data-drawn=true]').waitFor();
    const usd = (micro: number) => `$${Math.floor(micro / 1e6).toLocaleString('en-US')}.${String(micro % 1e6).padStart(6, '0')}`;
    expect(await texts('[data-figures=balance] dd')).toEqual([usd(balance.balance_micro_usd), usd(balance.held_micro_usd), usd(balance.spendable_micro_usd)]);
    const days = await page.locator('[data-table=daily] tbody tr').evaluateAll((rows) => rows.map((r) => ({ date: (r as any).dataset.date, cost: Number((r as any).dataset.cost) })));
    expect(days).toEqual(usage.daily.map((d) => ({ date: d.date, cost: d.cost_micro_usd })));
    expect(usage.daily.at(-1)!.cost_micro_usd).toBeGreaterThan(0);
    const models = await page.locator('[data-chart=model] li').evaluateAll((rows) => rows.map((r) => [(r as any).dataset.name, Number((r as any).dataset.cost)]));
    expect(models).toEqual(usage.by_model.map((m) => [m.model, m.cost_micro_usd]));
    expect(await page.locator('[data-chart=key] li').evaluateAll((rows) => rows.map((r) => Number((r as any).dataset.cost)))).toEqual(usage.by_key.map((k) => k.cost_micro_usd));
    expect(await page.textContent('[data-chart=key] li .bar-name')).toBe('console demo');
    const latest = await page.locator('[data-table=latest] tbody tr').evaluateAll((rows) => rows.map((r) => [(r as any).dataset.event, Number((r as any).dataset.cost)]));
    expect(latest).toEqual(usage.events.map((e) => [e.id, e.cost_micro_usd]));
    await expectAccessible('overview');

    await open('Usage', 'Usage and receipts');
    const listed = () => page.locator('[data-table=events] tbody tr').evaluateAll((rows) => rows.map((r) => [(r as any).dataset.event, Number((r as any).dataset.cost)]));
    await page.locator('[data-table=events]').waitFor();
    expect(await listed()).toEqual(usage.events.map((e) => [e.id, e.cost_micro_usd]));
    await page.fill('#f-model', 'no-such-model');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.locator('[data-empty="usage events"]').waitFor();
    await page.fill('#f-model', MODEL);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.locator('[data-table=events]').waitFor();
    expect(await listed()).toEqual(usage.events.map((e) => [e.id, e.cost_micro_usd]));
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const csv = await downloadedText(download);
    expect(csv.trim().split('\r\n')).toHaveLength(4);
    expect(csv).toContain(usage.events[0]!.id);
    // The live tail: a new call appears without a reload.
    await page.getByRole('button', { name: 'Start the live tail' }).click();
    await page.getByText('Live: new events appear here').waitFor();
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'One more' }] });
    await page.locator('[data-table=live] tbody tr').first().waitFor();
    const live = await session.request<{ events: Array<{ id: string; cost_micro_usd: number }> }>('GET', '/v1/usage/events', { query: { limit: 1 } });
    expect(await page.getAttribute('[data-table=live] tbody tr', 'data-event')).toBe(live.events[0]!.id);
    await expectAccessible('usage');
    await page.getByRole('button', { name: 'Stop the live tail' }).click();

    // A receipt: verified here, by the page, against the published signer.
    const first = usage.events[0]!;
    await page.locator(`[data-event="${first.id}"] a`).click();
    await page.getByRole('heading', { level: 1, name: 'Receipt' }).waitFor();
    await page.locator('[data-verdict]').waitFor();
    expect(await page.getAttribute('[data-verdict]', 'data-verdict')).toBe('valid');
    const receipt = await session.request<{ payload: { cost_micro_usd: number } }>('GET', `/v1/receipts/${first.receipt_id}`);
    expect(await page.textContent('[data-figure=cost]')).toBe(usd(receipt.payload.cost_micro_usd));
    expect(receipt.payload.cost_micro_usd).toBe(first.cost_micro_usd);
    await expectAccessible('receipt');
    // The verdict is the browser's own: a receipt altered on its way in is not verified.
    await page.route(`**/v1/receipts/${first.receipt_id}`, async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as { canonical: string };
      await route.fulfill({ response: res, json: { ...body, canonical: body.canonical.replace(/"cost_micro_usd":\d+/, '"cost_micro_usd":1') } });
    });
    await page.reload();
    await page.locator('[data-verdict]').waitFor();
    expect(await page.getAttribute('[data-verdict]', 'data-verdict')).toBe('invalid');
    await page.unroute(`**/v1/receipts/${first.receipt_id}`);
  });

  it('revokes a key by keyboard after showing the keys the cascade takes', async () => {
    const [parent] = await session.request<Array<{ id: string }>>('GET', '/v1/keys');
    const withDelegate = await session.request<{ id: string; key: string }>('POST', '/v1/keys', { body: { name: 'parent', scopes: ['keys:delegate', 'inference'] } });
    const sub = await new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: withDelegate.key } }).request<{ id: string }>('POST', '/v1/keys/delegate', { body: { name: 'sub-key' } });
    await open('Overview', 'Overview');
    await open('Keys', 'Keys');
    const row = page.locator(`[data-key="${withDelegate.id}"]`);
    await row.waitFor();
    await row.getByRole('button', { name: 'Revoke' }).focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog');
    await dialog.locator('[data-cascade] li').nth(1).waitFor();
    expect(await dialog.locator('[data-cascade] li').allTextContents()).toEqual([expect.stringContaining('parent'), expect.stringContaining('sub-key')]);
    await expectAccessible('keys-revoke');
    await page.keyboard.press('Escape'); // leaves it
    expect((await session.request<Array<{ id: string; status: string }>>('GET', '/v1/keys')).find((k) => k.id === sub.id)!.status).toBe('active');
    await row.getByRole('button', { name: 'Revoke' }).focus();
    await page.keyboard.press('Enter');
    await dialog.getByRole('button', { name: 'Revoke' }).focus();
    await page.keyboard.press('Enter');
    await page.locator(`[data-key="${sub.id}"][data-status=revoked]`).waitFor();
    const after = await session.request<Array<{ id: string; status: string }>>('GET', '/v1/keys');
    expect(after.filter((k) => [withDelegate.id, sub.id].includes(k.id)).map((k) => k.status)).toEqual(['revoked', 'revoked']);
    expect(after.find((k) => k.id === parent!.id)!.status).toBe('active');
  });

  it('shows the ledger and plans as the API gives them, and delivers a webhook test event', async () => {
    await open('Billing', 'Billing');
    await page.locator('[data-table=ledger]').waitFor();
    const ledger = await session.request<{ entries: Array<{ amount_micro_usd: number }> }>('GET', '/v1/billing/ledger', { query: { limit: 20 } });
    expect(await page.locator('[data-table=ledger] tbody tr').evaluateAll((rows) => rows.map((r) => Number((r as any).dataset.amount)))).toEqual(ledger.entries.map((e) => e.amount_micro_usd));
    await page.locator('[data-list=plans]').waitFor();
    await expectAccessible('billing');

    const receiver = await WebhookReceiver.open();
    try {
      await open('Webhooks', 'Webhooks');
      await page.locator('[data-empty=webhooks]').waitFor();
      await page.fill('#w-url', receiver.url);
      await page.getByRole('button', { name: 'Create webhook' }).click();
      const secret = (await page.locator('[data-secret]').textContent())!.trim();
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'I saved it' }).click();
      const [hook] = await session.request<Array<{ id: string }>>('GET', '/v1/webhooks');
      const row = page.locator(`[data-webhook="${hook!.id}"]`);
      await row.getByRole('button', { name: 'Send a test event' }).click();
      await t.gw.leader.runAllOnce();
      await expect.poll(() => receiver.hits.length).toBe(1);
      await row.getByRole('button', { name: 'Refresh' }).click();
      await row.locator('[data-table=deliveries] tbody tr[data-outcome=delivered]').waitFor();
      const deliveries = await session.request<Array<{ outcome: string; event_type: string }>>('GET', `/v1/webhooks/${hook!.id}/deliveries`);
      expect(deliveries.map((d) => [d.event_type, d.outcome])).toEqual([['webhook_test', 'delivered']]);
      await expectAccessible('webhooks');
    } finally {
      await receiver.close();
    }
  });

  it("switches to an organization it is a member of: the tab acts for the org's billing account, then back", async () => {
    const bob = await t.signIn();
    await t.gw.services.metering.credit(bob.accountId, 7_000_000, 'grant', `console-org-${bob.accountId}`);
    const org = await bob.client.request<{ id: string }>('POST', '/v1/orgs', { body: { name: 'Acme' } });
    const invite = await bob.client.request<{ token: string }>('POST', `/v1/orgs/${org.id}/invites`, { body: { role: 'admin' } });
    await session.request('POST', `/v1/orgs/invites/${invite.token}/accept`);
    const own = await session.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance');
    await page.goto(url());
    await page.locator('#org-switch').selectOption({ label: 'Acme (admin)' });
    await expect.poll(() => page.textContent('[data-figure=balance]')).toBe('$7.000000');
    // The switched session is the tab's: sessionStorage, not a cookie, not localStorage.
    expect(await page.evaluate(() => [Object.keys((globalThis as any).sessionStorage), (globalThis as any).localStorage.length])).toEqual([['svc.console.org_session'], 0]);
    await expectAccessible('overview-org');
    await page.getByRole('button', { name: 'Back to my account' }).click();
    await expect.poll(() => page.textContent('[data-figure=balance]')).not.toBe('$7.000000');
    expect(await page.textContent('[data-figure=balance]')).toBe(`$${Math.floor(own.balance_micro_usd / 1e6)}.${String(own.balance_micro_usd % 1e6).padStart(6, '0')}`);
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.length)).toBe(0);
    await open('Billing', 'Billing');
  });

  it('refuses a page of another origin that posts with the console session; the session goes on', async () => {
    const port = await freePort();
    const gateway = t.url;
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><form id="f" method="POST" action="${gateway}/v1/auth/logout-all"></form><form id="k" method="POST" enctype="text/plain" action="${gateway}/v1/keys"><input name='{"name":"forged","x":"' value='"}'></form>`);
    });
    await new Promise<void>((r) => evil.listen(port, '127.0.0.1', r));
    try {
      const before = (await session.request<unknown[]>('GET', '/v1/keys')).length;
      const other = await context.newPage();
      for (const form of ['f', 'k']) {
        await other.goto(`http://127.0.0.1:${port}/`);
        const [res] = await Promise.all([other.waitForNavigation(), other.evaluate((id) => (globalThis as any).document.getElementById(id).submit(), form)]);
        expect(res!.status(), form).toBe(403);
        expect(JSON.parse(await other.innerText('body')).error.type).toBe('csrf_refused');
      }
      await other.close();
      expect((await session.request<unknown[]>('GET', '/v1/keys')).length).toBe(before);
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Billing' }).or(page.getByRole('heading', { level: 1, name: 'Webhooks' })).waitFor();
      expect(await session.request('GET', '/v1/auth/me')).toMatchObject({ wallet_address: wallet.address });
    } finally {
      await new Promise((r) => evil.close(r));
    }
  });

  it('signs out everywhere after asking, and printed no error (no refusal of its policy) on the way', async () => {
    await page.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect((await session.raw('GET', '/v1/auth/me')).status).toBe(401);
    expect(problems.filter((p) => !/status of 40[13]/.test(p))).toEqual([]);
  });
});
