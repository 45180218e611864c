import { expect } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';

export interface OpenedPage {
  page: Page;
  status: number;
  /** What the page's script decided: `valid` or `invalid`. */
  verdict: string;
  /** Each `[data-check]` row's state. */
  checks: Record<string, string>;
  /** Every URL the page requested. */
  requests: string[];
}

/**
 * Opens a public page of the gateway (`/c/`, `/r/`, `/j/`) in a browser context, optionally altering its HTML
 * on the way, and waits for its in-browser verification; checks it is readable on a phone (nothing wider than
 * 390 px).
 */
export async function openPublicPage(context: BrowserContext, base: string, path: string, alter?: (html: string) => string): Promise<OpenedPage> {
  const page = await context.newPage();
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  if (alter) {
    await page.route(`${base}${path}`, async (route) => {
      const res = await route.fetch();
      const body = await res.text();
      const altered = alter(body);
      expect(altered, 'the alteration changed nothing').not.toBe(body);
      await route.fulfill({ response: res, body: altered });
    });
  }
  const res = await page.goto(`${base}${path}`);
  await expect.poll(() => page.getAttribute('#verdict', 'data-verdict'), { timeout: 15_000 }).not.toBe('pending');
  const checks: Record<string, string> = {};
  for (const el of await page.locator('[data-check]').all()) checks[(await el.getAttribute('data-check'))!] = (await el.getAttribute('data-state'))!;
  expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  return { page, status: res!.status(), verdict: (await page.getAttribute('#verdict', 'data-verdict'))!, checks, requests };
}
