import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { canonicalize, receiptHash, recoverPersonalMessage } from '@svc/shared';
import { context, type Context } from '../context.ts';
import { EXIT_FAILURE, setExitCode, usageError } from '../errors.ts';
import { readInput } from '../input.ts';
import { fields } from '../output.ts';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** Where the receipt signer of each gateway is kept once fetched: verification needs no network after that. */
export function signersPath(dir: string): string {
  return join(dir, 'signers.json');
}

type SignerCache = Record<string, { address: string; fetched_at: string }>;

function readSigners(dir: string): SignerCache {
  try {
    const data = JSON.parse(readFileSync(signersPath(dir), 'utf8')) as unknown;
    return typeof data === 'object' && data !== null ? (data as SignerCache) : {};
  } catch {
    return {};
  }
}

function saveSigner(dir: string, url: string, address: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const all = { ...readSigners(dir), [url]: { address, fetched_at: new Date().toISOString() } };
  const path = signersPath(dir);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(all, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** The trusted signer: --signer, else the cached one of this gateway, else fetched once from /v1/receipts/pubkey and cached. */
async function trustedSigner(ctx: Context, given: string | undefined, refresh: boolean): Promise<{ address: string; source: string }> {
  if (given) return { address: given, source: '--signer' };
  const cached = readSigners(ctx.dir)[ctx.url];
  if (cached && ADDRESS.test(cached.address) && !refresh) return { address: cached.address, source: `the receipt signer of ${ctx.url} (cached ${cached.fetched_at})` };
  const { address } = await ctx.client.receiptPubkey();
  if (!ADDRESS.test(address)) throw usageError(`${ctx.url}/v1/receipts/pubkey answered no address`);
  saveSigner(ctx.dir, ctx.url, address);
  return { address, source: `the receipt signer of ${ctx.url} (GET /v1/receipts/pubkey)` };
}

interface Parsed {
  canonical: string;
  signature: string;
  /** A hash the receipt claims for its canonical text. */
  hash?: string;
}

const decodeText = (s: string) => (s.trim().startsWith('{') ? s : Buffer.from(s, 'base64url').toString('utf8'));

/**
 * The signed text and signature of a receipt in any of the shapes the gateway hands out: a stored or shared
 * receipt (`canonical`, `signature`), a stream's receipt event or `svc chat --json` output's `receipt`
 * (`receipt`, `canonical`, `signature`), a sandbox run's `receipt` (`payload`, `signature`), the verify body
 * (`receipt` as object, canonical text or base64url, `signature`), or the x-svc-receipt and x-svc-signature
 * header values. Where a payload object and the canonical text both come, they must agree.
 */
export function parseReceipt(input: unknown): Parsed | { problem: string } {
  if (typeof input !== 'object' || input === null) return { problem: 'not a JSON object' };
  const o = input as Record<string, unknown>;
  if (typeof o.receipt === 'object' && o.receipt !== null && typeof (o.receipt as Record<string, unknown>).signature === 'string' && o.canonical === undefined) return parseReceipt(o.receipt);
  const signature = o.signature ?? o['x-svc-signature'];
  if (typeof signature !== 'string') return { problem: 'no signature field' };
  let canonical: string | undefined;
  const textual = typeof o.canonical === 'string' ? o.canonical : typeof o['x-svc-receipt'] === 'string' ? decodeText(o['x-svc-receipt'] as string) : typeof o.receipt === 'string' ? decodeText(o.receipt) : undefined;
  const payload = typeof o.payload === 'object' && o.payload !== null ? o.payload : typeof o.receipt === 'object' && o.receipt !== null ? o.receipt : undefined;
  try {
    // The signature covers the RFC 8785 form of the payload, whatever the spacing it came in.
    if (textual !== undefined) canonical = canonicalize(JSON.parse(textual));
    if (payload !== undefined) {
      const fromPayload = canonicalize(payload);
      if (canonical !== undefined && fromPayload !== canonical) return { problem: 'the payload does not match the signed canonical text' };
      canonical = fromPayload;
    }
  } catch {
    return { problem: 'the signed text is not valid JSON' };
  }
  if (canonical === undefined) return { problem: 'no payload, canonical text or x-svc-receipt field' };
  return { canonical, signature, ...(typeof o.hash === 'string' ? { hash: o.hash } : {}) };
}

export interface Verdict {
  valid: boolean;
  reason: string | null;
  signer: string;
  recovered_address: string | null;
  hash: string | null;
  payload: unknown;
}

/** Offline: recovers the EIP-191 signer of the canonical text and compares it with the trusted address. */
export function verifyOffline(input: unknown, signer: string): Verdict {
  const p = parseReceipt(input);
  if ('problem' in p) return { valid: false, reason: p.problem, signer, recovered_address: null, hash: null, payload: (input as { payload?: unknown })?.payload ?? null };
  const payload = JSON.parse(p.canonical) as unknown;
  const hash = receiptHash(p.canonical);
  const recovered = recoverPersonalMessage(p.canonical, p.signature);
  let reason: string | null = null;
  if (p.hash !== undefined && p.hash.toLowerCase() !== hash) reason = `its hash field ${p.hash} is not the sha256 of the signed text (${hash})`;
  else if (recovered === null) reason = 'the signature is malformed';
  else if (recovered.toLowerCase() !== signer.toLowerCase()) reason = `signed by ${recovered}, not by ${signer}`;
  return { valid: reason === null, reason, signer, recovered_address: recovered, hash, payload };
}

function address(value: string): string {
  if (!ADDRESS.test(value.trim())) throw new InvalidArgumentError('expected an address: 0x followed by 40 hex digits');
  return value.trim();
}

export function registerReceipts(program: Command): void {
  const receipts = program.command('receipts').description('Receipts: verify one offline');

  receipts
    .command('verify <file>')
    .description('Verify a receipt offline (FILE, or - for stdin): recover its EIP-191 signer and compare it with the gateway\'s receipt signer; exits 1 when invalid')
    .option('--signer <address>', 'the trusted signer address (default: the gateway\'s, from /v1/receipts/pubkey, cached in the config dir)', address)
    .option('--refresh-signer', 'fetch the gateway\'s signer address again instead of the cached one')
    .addHelpText(
      'after',
      '\nAccepts a stored receipt (GET /v1/receipts/{id}), the receipt of `svc chat --json` or of a stream, a sandbox\nrun\'s `receipt`, {"receipt": ..., "signature": ...}, or the x-svc-receipt and x-svc-signature header values as JSON.',
    )
    .action(async (file: string, opts: { signer?: string; refreshSigner?: boolean }, cmd: Command) => {
      const ctx = context(cmd);
      const text = await readInput(file, 'receipt file');
      let input: unknown;
      try {
        input = JSON.parse(text);
      } catch {
        throw usageError(`${file === '-' ? 'stdin' : file} is not JSON`, 'give the receipt as JSON (e.g. the output of `svc chat --json`, or GET /v1/receipts/{id})');
      }
      const trusted = await trustedSigner(ctx, opts.signer, opts.refreshSigner === true);
      const v = verifyOffline(input, trusted.address);
      ctx.out.result(v, () => JSON.stringify(v.payload, null, 2));
      ctx.out.note(
        v.valid
          ? fields([
              ['valid', `signed by ${v.recovered_address}, ${trusted.source}`],
              ['hash', v.hash ?? '-'],
            ])
          : `INVALID: ${v.reason}`,
      );
      if (!v.valid) setExitCode(EXIT_FAILURE);
    });
}
