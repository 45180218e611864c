import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { startTestGateway } from './support/gateway.ts';
import { launchChromium } from './support/browser.ts';

/**
 * The public claim page of a Legacy plan, /legacy/claim/{token}, in a real browser (headless Chromium on a
 * phone-sized screen): it shows the plan name, the wallet required and the status, loads nothing from
 * anywhere, fits the screen; a cancelled plan's link shows the same not-found page as an unknown link.
 */
let t: Awaited<ReturnType<typeof startTestGateway>>;
let browser: Browser;
let context: BrowserContext;

beforeAll(async () => {
  t = await startTestGateway();
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
});
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
});

async function plan(name: string) {
  const [owner, heir] = [await t.signIn(), await t.signIn()];
  const p = await owner.client.request<{ id: string; claim_links: Array<{ token: string; claim_url: string }> }>('POST', '/v1/legacy/plans', {
    body: { name, note: 'n', checkin_interval_seconds: 86_400, beneficiaries: [{ wallet: heir.account.address }] },
  });
  return { owner, heir, id: p.id, link: p.claim_links[0]! };
}

async function open(url: string) {
  const page = await context.newPage();
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  const res = await page.goto(url);
  return { page, status: res!.status(), requests };
}

describe('the claim page /legacy/claim/{token}', () => {
  it('renders the plan name (escaped), the wallet required and the status', async () => {
    const p = await plan('Grandma <b>"Rosa"</b> & the 🌹 box');
    const { page, status, requests } = await open(p.link.claim_url);
    expect(status).toBe(200);
    expect(await page.textContent('#plan-name')).toBe('Grandma <b>"Rosa"</b> & the 🌹 box');
    expect(await page.locator('#plan-name b').count()).toBe(0);
    expect(await page.textContent('#wallet')).toBe(p.heir.account.address);
    expect(await page.getAttribute('#status', 'data-status')).toBe('active');
    expect(await page.textContent('#status')).toContain('Not released');
    expect(requests).toEqual([p.link.claim_url]);
    expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.close();
  });

  it('shows the same not-found page for a cancelled plan and an unknown link', async () => {
    const p = await plan('Cancelled soon');
    await p.owner.client.request('POST', `/v1/legacy/plans/${p.id}/cancel`);
    const killed = await open(p.link.claim_url);
    const unknown = await open(`${t.url}/legacy/claim/lgc_${'x'.repeat(43)}`);
    expect([killed.status, unknown.status]).toEqual([404, 404]);
    expect(await killed.page.textContent('main')).toBe(await unknown.page.textContent('main'));
    expect(await killed.page.textContent('h1')).toBe('Not found');
    await killed.page.close();
    await unknown.page.close();
  });
});
