import { execFileSync } from 'node:child_process';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';

/**
 * A real browser for WebAuthn: the machine's Chromium (Debian's `chromium`, which .ci/run installs) driven by
 * playwright-core, with DevTools virtual authenticators standing in for a platform authenticator (a passkey
 * held on the device, with user verification). Nothing is downloaded.
 */
export function chromiumPath(): string {
  let path = '';
  try {
    path = execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    // not found: the message below
  }
  if (!path) throw new Error('chromium is not installed (apt-get install -y chromium); passkeys are tested in a real browser');
  return path;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page on `origin` with its own virtual authenticator: one device that holds passkeys. */
export interface Device {
  page: Page;
  cdp: CDPSession;
  authenticatorId: string;
  /** The credentials the authenticator holds, with their signature counters. */
  credentials(): Promise<Array<{ credentialId: string; signCount: number; isResidentCredential: boolean }>>;
  /** navigator.credentials.create() with the gateway's creation options (JSON); returns the credential's toJSON(). */
  create(options: unknown): Promise<Record<string, any>>;
  /** navigator.credentials.get() with the gateway's request options (JSON); returns the credential's toJSON(). */
  get(options: unknown): Promise<Record<string, any>>;
  /** Runs `fn(arg)` in the page (same origin as the gateway: fetch carries the page's cookies). */
  run<A, R>(fn: (arg: A) => Promise<R>, arg: A): Promise<R>;
}

export async function openDevice(context: BrowserContext, origin: string): Promise<Device> {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  });
  // A page of the gateway's own origin: WebAuthn needs a secure context, and http://localhost is one.
  await page.goto(`${origin}/healthz`);
  // A ceremony needs the page in focus: with several devices open, the one in use comes to the front.
  const front = async <T>(fn: () => Promise<T>) => {
    await page.bringToFront();
    return fn();
  };
  return {
    page,
    cdp,
    authenticatorId,
    async credentials() {
      return (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    },
    create: (options) =>
      front(() => page.evaluate(async (o) => {
        const w = globalThis as any;
        const cred = await w.navigator.credentials.create({ publicKey: w.PublicKeyCredential.parseCreationOptionsFromJSON(o) });
        return cred.toJSON();
      }, options)),
    get: (options) =>
      front(() => page.evaluate(async (o) => {
        const w = globalThis as any;
        const cred = await w.navigator.credentials.get({ publicKey: w.PublicKeyCredential.parseRequestOptionsFromJSON(o) });
        return cred.toJSON();
      }, options)),
    run: (fn, arg) => front(() => page.evaluate(fn as never, arg)) as never,
  };
}
