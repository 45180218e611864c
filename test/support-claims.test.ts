import { ed25519 } from '@noble/curves/ed25519';
import { getBase58Decoder } from '@solana/kit';
import canonicalize from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { randomBytes } from 'node:crypto';
import { startTestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { startLocalSolana, type LocalSolana } from './support/solana-rpc.ts';

/**
 * Holder support claims end to end with real signatures: an ed25519 key (@noble/curves) for the Solana wallet,
 * a viem account for the EVM wallet, and a local server speaking Solana's JSON-RPC getTransaction shapes. A
 * claim is registered once both signatures verify over the nonce's message and a finalized transaction raised
 * the address's balance of the configured mint; every refusal is a clear 4xx and writes nothing.
 */

const b58 = getBase58Decoder();
const utf8 = (s: string) => new TextEncoder().encode(s);

interface Nonce { nonce: string; message: string; solana_address: string; evm_address: string; mint: string; expires_at: string }
interface Claim {
  status: string;
  solana_address: string;
  evm_address: string;
  tx_signature: string;
  raised: string;
  balance_before: string;
  balance_after: string;
  notice: string;
  registration: { document: Record<string, any>; canonical: string; signature: Hex; signer: string };
}

class Holder {
  readonly secret = ed25519.utils.randomPrivateKey();
  readonly solana = b58.decode(ed25519.getPublicKey(this.secret));
  readonly evm: PrivateKeyAccount = privateKeyToAccount(generatePrivateKey());
  signSolana = (message: string) => b58.decode(ed25519.sign(utf8(message), this.secret));
  signEvm = (message: string) => this.evm.signMessage({ message });
}

let sol: LocalSolana;
let t: Awaited<ReturnType<typeof startTestGateway>>;
let off: Awaited<ReturnType<typeof startTestGateway>>;
const mint = b58.decode(randomBytes(32));
let signer: string;

beforeAll(async () => {
  sol = await startLocalSolana();
  [t, off] = await Promise.all([startTestGateway({ env: { SVC_SUPPORT_SOLANA_RPC_URL: sol.url, SVC_SUPPORT_TOKEN_MINT: mint, SVC_SUPPORT_NONCE_TTL_SECONDS: '600' } }), startTestGateway()]);
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
}, 180_000);
afterAll(async () => {
  await Promise.all([t?.close(), off?.close()]);
  await sol?.close();
});

const pub = <T>(method: string, path: string, body?: unknown) => t.client.request<T>(method, path, { credential: null, ...(body === undefined ? {} : { body }) });
const nonceFor = (h: Holder) => pub<Nonce>('POST', '/v1/support/nonce', { solana_address: h.solana, evm_address: h.evm.address });
const claim = (body: Record<string, unknown>) => pub<Claim>('POST', '/v1/support/claims', body);
const claims = async () => Number((await t.gw.database.db.selectFrom('support_claims').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

async function signed(h: Holder, n: Nonce, tx: string) {
  return { nonce: n.nonce, solana_signature: h.signSolana(n.message), evm_signature: await h.signEvm(n.message), tx_signature: tx };
}

describe('without a Solana RPC', () => {
  it('every route says so: 501 naming the settings', async () => {
    const h = new Holder();
    for (const [method, path, body] of [
      ['POST', '/v1/support/nonce', { solana_address: h.solana, evm_address: h.evm.address }],
      ['POST', '/v1/support/claims', { nonce: 'x', solana_signature: 'x', evm_signature: `0x${'1'.repeat(130)}`, tx_signature: 'x' }],
      ['GET', `/v1/support/claims/${h.solana}`, undefined],
    ] as const) {
      const e = await expectApiError(off.client.request(method, path, { credential: null, ...(body ? { body } : {}) }), 501, 'not_enabled');
      expect(e.message).toContain('SVC_SUPPORT_SOLANA_RPC_URL');
    }
  });
});

describe('a holder support claim', () => {
  const h = new Holder();
  let n: Nonce;
  let good: string;

  it('mints a nonce and the exact message both wallets sign', async () => {
    n = await nonceFor(h);
    expect(n.nonce).toMatch(/^spn_/);
    expect(n).toMatchObject({ solana_address: h.solana, evm_address: h.evm.address, mint });
    for (const part of [h.solana, h.evm.address, mint, n.nonce, 'not an approval and not a promise of payment']) expect(n.message).toContain(part);
    expect(new Date(n.expires_at).getTime()).toBe(t.clock.now().getTime() + 600_000);
    await expectApiError(pub('POST', '/v1/support/nonce', { solana_address: 'not-base58-0OIl', evm_address: h.evm.address }), 400, 'invalid_request');
    await expectApiError(pub('POST', '/v1/support/nonce', { solana_address: h.solana, evm_address: '0x12' }), 400, 'invalid_request');
  });

  it('refuses signatures over another message, by another key, and transactions that are not final or raise nothing; nothing is written', async () => {
    good = sol.addTokenTransfer({ owner: h.solana, mint, amount: 5_000_000n, pre: 1_000_000n, finalized: true });
    const ok = await signed(h, n, good);
    const other = new Holder();
    const refusals: Array<[Record<string, unknown>, number, string, string]> = [
      [{ ...ok, solana_signature: h.signSolana(`${n.message}.`) }, 400, 'invalid_request', 'bad_solana_signature'],
      [{ ...ok, solana_signature: other.signSolana(n.message) }, 400, 'invalid_request', 'bad_solana_signature'],
      [{ ...ok, evm_signature: await h.signEvm(n.message.replace(n.nonce, 'spn_other')) }, 400, 'invalid_request', 'bad_evm_signature'],
      [{ ...ok, evm_signature: await other.signEvm(n.message) }, 400, 'invalid_request', 'bad_evm_signature'],
      [{ ...ok, nonce: 'spn_unknown' }, 400, 'invalid_request', 'nonce_unknown'],
      [{ ...ok, tx_signature: sol.addTokenTransfer({ owner: h.solana, mint, amount: 1n }) }, 422, 'transfer_rejected', 'not_finalized'],
      [{ ...ok, tx_signature: sol.addTokenTransfer({ owner: other.solana, mint, amount: 9n, finalized: true }) }, 422, 'transfer_rejected', 'balance_not_raised'],
      [{ ...ok, tx_signature: sol.addTokenTransfer({ owner: h.solana, mint: b58.decode(randomBytes(32)), amount: 9n, finalized: true }) }, 422, 'transfer_rejected', 'balance_not_raised'],
      [{ ...ok, tx_signature: sol.addTokenTransfer({ owner: h.solana, mint, amount: 9n, finalized: true, err: { InstructionError: [0, 'Custom'] } }) }, 422, 'transfer_rejected', 'failed'],
      [{ ...ok, tx_signature: b58.decode(randomBytes(64)) }, 422, 'transfer_rejected', 'not_finalized'],
      [{ ...ok, tx_signature: 'abc' }, 400, 'invalid_request', ''],
    ];
    for (const [body, status, type, reason] of refusals) {
      const e = await expectApiError(claim(body), status, type);
      if (reason) expect(e.extra.reason, e.message).toBe(reason);
    }
    sol.down = true;
    await expectApiError(claim(ok), 502, 'upstream_error');
    sol.down = false;
    expect(await claims()).toBe(0);
  });

  it('registers the claim: both signatures and the finalized raise verified; registration only, signed', async () => {
    const c = await claim(await signed(h, n, good));
    expect(c).toMatchObject({ status: 'registered', solana_address: h.solana, evm_address: h.evm.address, tx_signature: good, balance_before: '1000000', balance_after: '6000000', raised: '5000000' });
    expect(c.notice).toMatch(/not an approval .* not a promise of payment/);
    expect(await recoverMessageAddress({ message: c.registration.canonical, signature: c.registration.signature })).toBe(signer);
    expect(canonicalize(c.registration.document)).toBe(c.registration.canonical);
    expect(c.registration.document).toMatchObject({ kind: 'support_claim_registration', solana_address: h.solana, mint, notice: c.notice });
    expect(await pub<Claim>('GET', `/v1/support/claims/${h.solana}`)).toEqual(c);
    expect(await claims()).toBe(1);
  });

  it('refuses a nonce used again, a second claim for the address, a transaction used twice and an expired nonce', async () => {
    expect((await expectApiError(claim(await signed(h, n, good)), 409, 'conflict')).extra.reason).toBe('nonce_used');
    const again = await nonceFor(h);
    const fresh = sol.addTokenTransfer({ owner: h.solana, mint, amount: 1n, finalized: true });
    expect((await expectApiError(claim(await signed(h, again, fresh)), 409, 'conflict')).extra.reason).toBe('already_registered');
    const h2 = new Holder();
    const n2 = await nonceFor(h2);
    expect((await expectApiError(claim(await signed(h2, n2, good)), 409, 'conflict')).extra.reason).toBe('transaction_used');
    t.clock.advance(601_000);
    const late = sol.addTokenTransfer({ owner: h2.solana, mint, amount: 1n, finalized: true });
    expect((await expectApiError(claim(await signed(h2, n2, late)), 400, 'invalid_request')).extra.reason).toBe('nonce_expired');
    // A transaction confirmed at first counts once it is finalized.
    const h3 = new Holder();
    const n3 = await nonceFor(h3);
    const slow = sol.addTokenTransfer({ owner: h3.solana, mint, amount: 7n, pre: null });
    expect((await expectApiError(claim(await signed(h3, n3, slow)), 422, 'transfer_rejected')).extra.reason).toBe('not_finalized');
    sol.finalize();
    expect((await claim(await signed(h3, n3, slow))).raised).toBe('7');
    expect(await claims()).toBe(2);
  });

  it('answers a claim by Solana address: unknown 404, malformed 400', async () => {
    await expectApiError(pub('GET', `/v1/support/claims/${new Holder().solana}`), 404, 'not_found');
    await expectApiError(pub('GET', '/v1/support/claims/0xnot-solana'), 400, 'invalid_request');
  });
});
