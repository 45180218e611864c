import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { agentWithKey, untilOnline, type TestAgent } from './support/agent.ts';
import { launchChromium } from './support/browser.ts';
import { axeSerious, consoleProblems, downloadedText, ensureConsoleBuilt, injectWallet, screenshots } from './support/console.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * The console of a node operator and of an admin, end to end in Chromium with a real node agent and Docker: the
 * operator enrolls a node in the page (its key shown once, with the install commands), the agent runs with that
 * key, an admin (the token typed into the admin page) approves it, the operator sees it come online, opens a
 * sandbox session and a terminal in the browser (a command, a resize, Ctrl-C, exit), and the admin drains the
 * node. Figures are compared with the API; axe-core runs on each page; screenshots go to .ci/out/console/.
 */
const enabled = sandboxImage();
if (!enabled) console.warn(`console fleet tests skipped: Docker engine or image ${SMALL_IMAGE} missing (installers/sandbox-image/build.sh --small)`);

let t: TestGateway;
let browser: Browser;
let operator: BrowserContext;
let page: Page; // the operator's
let adminPage: Page; // another browser profile: the admin's, with no session
let problems: string[];
let session: SvcClient;
let agent: TestAgent | undefined;
let nodeId: string;
const admin = () => new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });

beforeAll(async () => {
  if (!enabled) return;
  await ensureConsoleBuilt();
  t = await startTestGateway({ env: { SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000' } });
  browser = await launchChromium();
  operator = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await injectWallet(operator, privateKeyToAccount(generatePrivateKey()));
  page = await operator.newPage();
  problems = consoleProblems(page);
  adminPage = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  problems.push(...consoleProblems(adminPage));
  await page.goto(`${t.url}/console/nodes`);
  await page.getByRole('button', { name: 'Sign in with a wallet' }).click();
  await page.getByRole('heading', { level: 1, name: 'Nodes' }).waitFor();
  const cookie = (await operator.cookies()).find((c) => c.name === 'svc_session')!;
  session = new SvcClient({ baseUrl: t.url, credential: { kind: 'session', token: cookie.value } });
  const me = await session.request<{ account_id: string }>('GET', '/v1/auth/me');
  await t.gw.services.metering.credit(me.account_id, 100_000_000, 'grant', `console-fleet-${me.account_id}`);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await browser?.close();
  await t?.close();
});

const statusOf = (p: Page, table: string, id: string) => p.getAttribute(`[data-table=${table}] [data-node="${id}"]`, 'data-status');
async function expectAccessible(p: Page, name: string) {
  await p.locator('.state.loading').first().waitFor({ state: 'detached' }).catch(() => undefined);
  expect(await axeSerious(p), name).toEqual([]);
  await screenshots(p, name);
}
async function refresh(p: Page) {
  await p.getByRole('button', { name: 'Refresh' }).first().click();
  await p.locator('.state.loading').first().waitFor({ state: 'detached' }).catch(() => undefined);
}
/** The text the terminal shows now (xterm.js's DOM rows). */
const screen = () => page.locator('.xterm-rows').innerText();

describe.skipIf(!enabled)('the console of a node operator and an admin', () => {
  it('enrolls a node with its key shown once and the install commands, and an admin approves it: the operator sees it online', async () => {
    await page.locator('[data-empty="your nodes"]').waitFor();
    await page.fill('#n-name', 'box-1');
    await page.getByRole('button', { name: 'Enroll' }).click();
    const nodeKey = (await page.locator('[data-secret]').textContent())!.trim();
    expect(nodeKey).toMatch(/^nk-svc_/);
    expect(await page.getByLabel('Install commands').textContent()).toContain(`install.sh --url ${t.url} --key-file node.key`);
    await expectAccessible(page, 'nodes-enrolled');
    await page.getByRole('button', { name: 'I saved it' }).click();
    const [mine] = await session.request<Array<{ id: string; status: string; name: string }>>('GET', '/v1/nodes/mine');
    nodeId = mine!.id;
    expect(mine).toMatchObject({ name: 'box-1', status: 'pending_approval' });
    expect(await statusOf(page, 'nodes', nodeId)).toBe('pending_approval');

    agent = await agentWithKey(t.url, nodeKey, nodeId);
    agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE });
    await untilOnline(t, nodeId);

    await adminPage.goto(`${t.url}/console/admin`);
    await expectAccessible(adminPage, 'admin-token');
    await adminPage.fill('#admin-token', ADMIN_TOKEN);
    await adminPage.getByRole('button', { name: 'Continue' }).click();
    const row = adminPage.locator(`[data-table=admin-nodes] [data-node="${nodeId}"]`);
    await row.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => statusOf(adminPage, 'admin-nodes', nodeId)).toBe('online');
    expect((await admin().request<Array<{ id: string; approved: boolean }>>('GET', '/v1/admin/nodes')).find((n) => n.id === nodeId)!.approved).toBe(true);
    expect(await adminPage.evaluate(() => [(globalThis as any).localStorage.length, Object.keys((globalThis as any).sessionStorage)])).toEqual([0, ['svc.console.admin_token']]);

    await refresh(page);
    await expect.poll(() => statusOf(page, 'nodes', nodeId)).toBe('online');
    expect((await session.request<Array<{ status: string }>>('GET', '/v1/nodes/mine'))[0]!.status).toBe('online');
    await expectAccessible(page, 'nodes');
  });

  it('opens a sandbox session and a terminal in the browser (a command, a resize, Ctrl-C, the exit metered with its receipt), its files and a snapshot', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Sandboxes' }).click();
    await page.getByRole('button', { name: /Create a key for this tab/ }).click();
    await page.getByRole('button', { name: 'Open a session' }).click();
    const row = page.locator('[data-table=sessions] tbody tr').first();
    await row.waitFor();
    const sessionId = (await row.getAttribute('data-session'))!;
    await row.getByRole('button', { name: 'Terminal' }).click();
    await page.locator('[data-terminal-state]', { hasText: 'Connected' }).waitFor({ timeout: 60_000 });
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('echo hi-$((6*7))\n');
    await expect.poll(screen, { timeout: 20_000 }).toContain('hi-42');
    await expectAccessible(page, 'sandboxes-terminal');

    // The window narrows: the terminal follows (a resize frame), as stty in the box sees it.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.keyboard.type("clear; stty size | sed 's/^/SIZE:/'\n");
    await expect.poll(async () => Number(/SIZE:\d+ (\d+)/.exec(await screen())?.[1] ?? 999), { timeout: 20_000 }).toBeLessThan(60);
    await page.setViewportSize({ width: 1280, height: 800 });

    // Ctrl-C from the keyboard stops the foreground program; the shell stays.
    await page.keyboard.type('echo started-$((1+1)); sleep 300\n');
    await expect.poll(screen, { timeout: 20_000 }).toContain('started-2');
    // A ^C that lands between the echo and the sleep's start reaches no program (and flushes what was typed
    // ahead): press it, then ask the shell, until the shell answers.
    await expect
      .poll(
        async () => {
          await page.keyboard.press('Control+C');
          await page.keyboard.type('echo after-$((2+3))\n');
          return screen();
        },
        { timeout: 20_000, interval: 500 },
      )
      .toContain('after-5');

    await page.keyboard.type('echo hello > note.txt; mkdir -p work\n');
    await page.keyboard.type('exit\n');
    const ended = page.locator('[data-terminal-exit]');
    await ended.waitFor({ timeout: 20_000 });
    expect(await ended.getAttribute('data-terminal-exit')).toBe('exited');
    await ended.getByRole('link', { name: 'Its receipt' }).waitFor();
    await page.getByRole('button', { name: 'Close terminal' }).click();

    await refresh(page);
    const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await page.evaluate(() => (globalThis as any).sessionStorage.getItem('svc.console.api_key')))! } });
    const s = await api.request<{ cost_micro_usd: number; exec_count: number }>('GET', `/v1/sandboxes/sessions/${sessionId}`);
    expect(s.exec_count).toBe(1); // the terminal
    await expect.poll(async () => Number(await row.getAttribute('data-cost'))).toBe(s.cost_micro_usd);
    // The workspace's files, as the terminal left them; a snapshot of it.
    await row.getByRole('button', { name: 'Files' }).click();
    const files = page.locator('[data-list=files]');
    await files.getByRole('button', { name: 'note.txt' }).waitFor();
    await files.getByRole('button', { name: 'work/' }).waitFor();
    await expectAccessible(page, 'sandboxes-files');
    const download = page.waitForEvent('download');
    await files.getByRole('button', { name: 'note.txt' }).click();
    const body = await downloadedText(download);
    expect(body).toBe('hello\n');
    await page.getByRole('button', { name: 'Close files' }).click();
    await row.getByRole('button', { name: 'Snapshot' }).click();
    await page.locator('[data-list=snapshots] li').first().waitFor();
    const snaps = await api.request<Array<{ id: string; session_id: string }>>('GET', '/v1/sandboxes/snapshots');
    expect(snaps.map((x) => x.session_id)).toEqual([sessionId]);
    await row.getByRole('button', { name: 'Stop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Stop' }).click();
    await expect.poll(() => row.getAttribute('data-status')).toBe('stopped');
  });

  it('drains the node from the admin page after asking; the fleet summary and the registry say so', async () => {
    const metrics = await admin().request<{ fleet: { online_by_kind: Record<string, number>; running_jobs: number } }>('GET', '/v1/admin/metrics');
    await refresh(adminPage);
    await expect.poll(() => adminPage.textContent('[data-figure=online-sandbox]')).toBe(String(metrics.fleet.online_by_kind.sandbox));
    expect(metrics.fleet.online_by_kind.sandbox).toBe(1);
    await expect.poll(() => adminPage.textContent('[data-figure=running-jobs]')).toBe(String(metrics.fleet.running_jobs));
    const row = adminPage.locator(`[data-table=admin-nodes] [data-node="${nodeId}"]`);
    await row.getByRole('button', { name: 'Drain' }).click();
    const dialog = adminPage.getByRole('dialog');
    await expectAccessible(adminPage, 'admin-drain');
    await dialog.getByRole('button', { name: 'Drain' }).click();
    await expect.poll(() => statusOf(adminPage, 'admin-nodes', nodeId)).toBe('draining');
    const registry = await t.client.request<Array<{ id: string; status?: string }>>('GET', '/v1/nodes');
    expect(registry.find((n) => n.id === nodeId)!.status).toBe('draining');
    await expectAccessible(adminPage, 'admin');
    expect(problems.filter((p) => !/status of 40[134]/.test(p))).toEqual([]);
  });
});
