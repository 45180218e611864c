import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Download, Page } from 'playwright-core';
import type { PrivateKeyAccount } from 'viem/accounts';

/**
 * The console in a real browser: its build (`scripts/build.mjs --if-stale console`, here before the tests),
 * an EIP-1193 wallet injected into its pages, axe-core run on a page, and screenshots at desktop and phone width
 * kept under .ci/out/console/.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONSOLE = join(ROOT, 'console');
const DIST = join(CONSOLE, 'dist');
export const SHOTS = join(ROOT, '.ci', 'out', 'console');

/**
 * Builds the console (vite build, a few seconds) unless console/dist is current. Test files running at once
 * take turns through a lock directory, so one builds and the others find the build current.
 */
export async function ensureConsoleBuilt(): Promise<void> {
  const lock = join(CONSOLE, '.build-lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`the console build lock ${lock} is held for too long (remove it if no build runs)`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    // The project's build of the console target, only when console/dist is missing or older than a source it was built from.
    execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale', 'console'], { cwd: ROOT, stdio: 'pipe' });
  } finally {
    rmdirSync(lock);
  }
}

/**
 * A browser wallet on every page of `context`: `window.ethereum` (EIP-1193) whose account is `wallet` and whose
 * `personal_sign` signs with its key in the test process. Returns the messages it signed.
 */
export async function injectWallet(context: BrowserContext, wallet: PrivateKeyAccount, chainId = 1): Promise<string[]> {
  const signed: string[] = [];
  await context.exposeFunction('svcTestWalletSign', async (hex: `0x${string}`) => {
    signed.push(Buffer.from(hex.slice(2), 'hex').toString('utf8'));
    return wallet.signMessage({ message: { raw: hex } });
  });
  // A string, not a function: a function's text as a transpiler wrote it may call helpers the page lacks.
  await context.addInitScript(`(() => {
    const address = ${JSON.stringify(wallet.address.toLowerCase())};
    const chain = ${JSON.stringify(`0x${chainId.toString(16)}`)};
    window.ethereum = {
      request: async ({ method, params }) => {
        if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [address];
        if (method === 'eth_chainId') return chain;
        if (method === 'personal_sign') return window.svcTestWalletSign(params[0]);
        throw new Error('unsupported ' + method);
      },
    };
  })();`);
  return signed;
}

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core's WCAG 2 A/AA rules on the page as it is now; the serious and critical violations. axe is evaluated
 * through DevTools (the page's CSP admits no script but its own, and stays in force).
 */
export async function axeSerious(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(ctx: unknown, o: unknown): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const r = await axe.run((globalThis as any).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => JSON.stringify(n.target)) }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** Screenshots of the page at 1280 and 390 pixels wide into .ci/out/console/<name>-<width>.png; the viewport is left at 1280. */
export async function screenshots(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  for (const width of [390, 1280]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    await page.evaluate(() => new Promise((r) => (globalThis as any).requestAnimationFrame(() => (globalThis as any).requestAnimationFrame(r))));
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
  }
}

/** Notes what the page printed to its console (CSP refusals show there), to fail on. */
export function consoleProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(String(e)));
  return problems;
}

/** The text of a file the page handed the browser to save. */
export async function downloadedText(download: Promise<Download>): Promise<string> {
  let out = '';
  for await (const chunk of await (await download).createReadStream()) out += chunk;
  return out;
}
