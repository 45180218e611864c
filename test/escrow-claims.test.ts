import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, toHex, type Address, type Hex } from 'viem';
import { signPersonalMessage, generatePrivateKey, privateKeyToAddress } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { checkClaim } from '../control-plane/src/modules/escrow/check.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { compileEscrow, deployEscrow, type Escrow } from './support/escrow.ts';
import { expectApiError } from './support/expect-error.ts';
import { jcs, notarize, notaryAccount, sha, type Notarized } from './support/notary.ts';

/**
 * Escrow claims end to end: real receipts from billable notary calls, claims prepared through the API, and a
 * real chain (anvil) running the reference escrow compiled from contracts/escrow/ReceiptEscrow.sol. What the
 * API calls claimable is claimed on chain with the calldata the API assembled; what it does not, reverts.
 */

interface Reason { code: string; message: string }
interface ClaimCheck {
  id: string | null;
  object: 'escrow.claim';
  request_id: string;
  receipt_kind: string;
  escrow: { kind: string; job_field: string; job_id: string | null };
  claimable: boolean;
  reasons: Reason[];
  checks: {
    signature: { ok: boolean; recovered_address: string | null; expected_signer: string };
    job: { ok: boolean; field: string; occurrences: number; value: string | null; offset: number | null };
    kind: { ok: boolean; expected: string; declared: string | null; occurrences: number; offset: number | null };
  };
  claim: {
    function: string;
    args: { jobId: string | null; payload: Hex; signature: Hex };
    calldata: Hex | null;
    payload_text: string;
    payload_length: number;
    payload_hash: string;
    digest: Hex;
    v: number | null;
    r: Hex | null;
    s: Hex | null;
    signer: string;
  };
  trust_model: string;
  checked_at: string;
  prepared: (StoredClaim & { id: string }) | null;
}
interface StoredClaim { id: string; request_id: string; kind: string; job_field: string; job_id: string | null; claim_job_id: string | null; claimable: boolean; reasons: Reason[]; recovered_address: string | null; payload_hash: string; created_at: string }
interface Trail { claims: StoredClaim[]; count: number; cap: number; trust_model: string }

const ETH = 10n ** 18n;
let t: TestGateway;
let chain: TestChain;
let escrow: Escrow;
let signer: Address;
let alice: Awaited<ReturnType<typeof notaryAccount>>;
let bob: Awaited<ReturnType<typeof notaryAccount>>;

const prepare = (c: SvcClient, body: Record<string, unknown>) => c.request<ClaimCheck>('POST', '/v1/escrow/claims', { body });
const recheck = (c: SvcClient, id: string, query: Record<string, string> = {}) => c.request<ClaimCheck>('GET', `/v1/escrow/claims/${encodeURIComponent(id)}`, { query });
const trail = (c: SvcClient) => c.request<Trail>('GET', '/v1/escrow/claims');
const claimRows = async () => Number((await t.gw.database.db.selectFrom('escrow_claims').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
const balance = (a: Address) => chain.pub.getBalance({ address: a, blockTag: 'latest' });
const codes = (c: { reasons: Reason[] }) => c.reasons.map((r) => r.code);

/** A payer funds an escrow for `jobId`, paying a new payee; returns the payee. */
async function fund(jobId: string, kind: string, opts: { jobField?: string; signer?: Address; amount?: bigint } = {}): Promise<Address> {
  const payee = (await chain.newWallet()).address;
  await escrow.deposit(chain.accounts[1]!, { jobId, jobField: opts.jobField ?? 'id', kind, payee, signer: opts.signer ?? signer, amount: opts.amount ?? ETH });
  return payee;
}

/** Sends the API's calldata from a third party; expects the given custom error, a mined revert and no payout. */
async function expectRevert(prepared: ClaimCheck, payee: Address, error: string): Promise<{ name: string; args: readonly unknown[] }> {
  const data = prepared.claim.calldata ?? encodeFunctionData({ abi: escrow.abi, functionName: 'claim', args: [prepared.escrow.job_id!, prepared.claim.args.payload, prepared.claim.args.signature] });
  const before = await balance(payee);
  const why = await escrow.revertOf(chain.accounts[2]!, data);
  expect(why?.name, JSON.stringify(prepared.reasons)).toBe(error);
  expect((await escrow.send(chain.accounts[2]!, data)).status).toBe('reverted');
  expect(await balance(payee)).toBe(before);
  return why!;
}

beforeAll(async () => {
  t = await startTestGateway();
  chain = await startChain();
  escrow = await deployEscrow(chain, chain.accounts[0]!);
  signer = (await t.client.request<{ address: Address }>('GET', '/v1/receipts/pubkey')).address;
  alice = await notaryAccount(t);
  bob = await notaryAccount(t);
});
afterAll(async () => {
  await chain?.stop();
  await t?.close();
});

describe('the reference escrow contract', () => {
  it('compiles with the pinned solc without warnings', async () => {
    expect((await compileEscrow()).warnings).toEqual([]);
  });

  it('refuses deposits whose terms it could never match', async () => {
    const payee = (await chain.newWallet()).address;
    const bad: Array<[string, string, string, string]> = [
      ['job"1', 'id', 'notary', 'jobId'],
      ['job-1', '', 'notary', 'jobField'],
      ['job-1', 'kind', 'notary', 'jobField cannot be kind'],
      ['job-1', 'id', 'no\\tary', 'kind'],
    ];
    for (const [jobId, jobField, kind, needle] of bad) {
      const data = encodeFunctionData({ abi: escrow.abi, functionName: 'deposit', args: [jobId, jobField, kind, payee, signer] });
      let message = '';
      try {
        await chain.pub.call({ account: chain.accounts[1]!, to: escrow.address, data, value: ETH });
      } catch (e) {
        message = String(e);
      }
      expect(message, `${jobId} ${jobField} ${kind}`).toContain(needle);
    }
  });
});

describe('a claimable receipt', () => {
  let r: Notarized;
  let prepared: ClaimCheck;
  let payee: Address;

  it('is prepared from your receipt: the exact claim inputs, both preconditions, the trust statement; stored in the trail', async () => {
    r = await notarize(alice.api, 'escrow-run'); // in a run: the payload also has a nested run.id
    expect(r.payload.run?.id).toBe('escrow-run');
    const rows = await claimRows();
    prepared = await prepare(alice.client, { request_id: r.id, kind: 'notary' });
    expect(prepared).toMatchObject({
      object: 'escrow.claim',
      request_id: r.id,
      receipt_kind: 'notary',
      escrow: { kind: 'notary', job_field: 'id', job_id: null },
      claimable: true,
      reasons: [],
      prepared: null,
    });
    expect(prepared.id).toMatch(/^escl_/);
    expect(prepared.checks.signature).toEqual({ ok: true, recovered_address: signer, expected_signer: signer });
    expect(prepared.checks.job).toMatchObject({ ok: true, field: 'id', occurrences: 1, value: r.id });
    expect(prepared.checks.kind).toMatchObject({ ok: true, expected: 'notary', declared: 'notary', occurrences: 1 });
    // The exact inputs: the payload bytes as signed, the signature as signed, the job id.
    expect(prepared.claim.function).toBe('claim(string jobId, bytes payload, bytes signature)');
    expect(prepared.claim.args).toEqual({ jobId: r.id, payload: toHex(new TextEncoder().encode(r.canonical)), signature: r.signature });
    expect(prepared.claim.payload_text).toBe(r.canonical);
    expect(prepared.claim.payload_hash).toBe(sha(r.canonical));
    expect(prepared.claim.signer).toBe(signer);
    expect(prepared.claim.calldata).toBe(encodeFunctionData({ abi: escrow.abi, functionName: 'claim', args: [r.id, prepared.claim.args.payload, r.signature] }));
    expect(`${prepared.claim.r}${prepared.claim.s!.slice(2)}${prepared.claim.v!.toString(16)}`).toBe(r.signature);
    expect(r.canonical.slice(prepared.checks.job.offset!, prepared.checks.job.offset! + r.id.length + 3)).toBe(`:"${r.id}"`);
    expect(prepared.trust_model).toMatch(/does not state that an escrow for this job exists, is funded/);
    expect(await claimRows()).toBe(rows + 1);
  });

  it('the contract agrees on chain: the signer it recovers and the binding', async () => {
    expect(await escrow.read('recoverSigner', [prepared.claim.args.payload, r.signature])).toBe(signer);
    expect(await escrow.read('bindingFailure', [prepared.claim.args.payload, 'id', r.id, 'notary'])).toBe('');
  });

  it('is claimed on chain with the calldata the gateway assembled: the payee is paid, once', async () => {
    payee = await fund(r.id, 'notary', { amount: 3n * ETH });
    const before = await balance(payee);
    const sent = await escrow.send(chain.accounts[2]!, prepared.claim.calldata!); // anyone may send it; the payee gets paid
    expect(sent.status).toBe('success');
    expect(sent.gasUsed).toBeLessThan(150_000n);
    expect(await balance(payee)).toBe(before + 3n * ETH);
    expect(await escrow.read<{ paid: boolean }>('escrowOf', [r.id])).toMatchObject({ paid: true, payee });

    // A second claim of the same job reverts and pays nothing, even though the receipt is still claimable.
    const again = await prepare(alice.client, { request_id: r.id, kind: 'notary', job_id: r.id });
    expect(again.claimable).toBe(true);
    const why = await expectRevert(again, payee, 'AlreadyPaid');
    expect(why.args).toEqual([r.id]);
  });

  it('binds through another top-level field when the escrow names it (the usage-event id)', async () => {
    const r2 = await notarize(alice.api);
    const ue = r2.payload.usage_event_id as string;
    const p = await prepare(alice.client, { request_id: r2.id, kind: 'notary', job_field: 'usage_event_id' });
    expect(p).toMatchObject({ claimable: true, escrow: { job_field: 'usage_event_id' }, claim: { args: { jobId: ue } } });
    const payee2 = await fund(ue, 'notary', { jobField: 'usage_event_id' });
    const before = await balance(payee2);
    expect((await escrow.send(chain.accounts[2]!, p.claim.calldata!)).status).toBe('success');
    expect(await balance(payee2)).toBe(before + ETH);
  });
});

describe('receipts that are not claimable revert on chain', () => {
  it('wrong kind: the escrow expects another kind', async () => {
    const r = await notarize(alice.api);
    const p = await prepare(alice.client, { request_id: r.id, kind: 'inference' });
    expect(p.claimable).toBe(false);
    expect(codes(p)).toEqual(['kind_mismatch']);
    expect(p.checks.kind).toMatchObject({ ok: false, expected: 'inference', declared: 'notary' });
    const payee = await fund(r.id, 'inference');
    const why = await expectRevert(p, payee, 'NotBound');
    expect(why.args).toEqual(['kind differs']);
  });

  it('empty kind: the escrow expects a receipt that declares none, and this one declares "notary"', async () => {
    const r = await notarize(alice.api);
    const p = await prepare(alice.client, { request_id: r.id, kind: '' });
    expect(codes(p)).toEqual(['kind_declared']);
    expect(p.escrow.kind).toBe('');
    const payee = await fund(r.id, '');
    const why = await expectRevert(p, payee, 'NotBound');
    expect(why.args).toEqual(['receipt declares a kind; the escrow expects none']);
  });

  it('the job-id field is not top-level (only nested in the payload)', async () => {
    const r = await notarize(alice.api);
    const label = (r.payload.detail as { label: string }).label;
    const p = await prepare(alice.client, { request_id: r.id, kind: 'notary', job_field: 'label', job_id: label });
    expect(codes(p)).toEqual(['job_field_missing']);
    const payee = await fund(label, 'notary', { jobField: 'label' });
    const why = await expectRevert(p, payee, 'NotBound');
    expect(why.args).toEqual(['no top-level job-id field']);
  });

  it('tampered payload: the stored text no longer recovers to the receipt signer', async () => {
    const r = await notarize(alice.api);
    const tampered = r.canonical.replace(/"cost_micro_usd":\d+/, '"cost_micro_usd":0');
    expect(tampered).not.toBe(r.canonical);
    await t.gw.database.db.updateTable('receipts').set({ payload: tampered }).where('id', '=', r.id).execute();
    const p = await prepare(alice.client, { request_id: r.id, kind: 'notary' });
    expect(codes(p)).toEqual(['signature_mismatch']);
    expect(p.checks.signature.ok).toBe(false);
    expect(p.checks.signature.recovered_address).not.toBe(signer);
    expect(p.claim.args.payload).toBe(toHex(new TextEncoder().encode(tampered)));
    const payee = await fund(r.id, 'notary');
    const why = await expectRevert(p, payee, 'BadSignature');
    expect(why.args).toEqual([p.checks.signature.recovered_address]);
  });

  it('a signature from another key over the same payload', async () => {
    const r = await notarize(alice.api);
    const other = generatePrivateKey();
    await t.gw.database.db.updateTable('receipts').set({ signature: signPersonalMessage(other, r.canonical) }).where('id', '=', r.id).execute();
    const p = await prepare(alice.client, { request_id: r.id, kind: 'notary' });
    expect(codes(p)).toEqual(['signature_mismatch']);
    expect(p.checks.signature.recovered_address).toBe(privateKeyToAddress(other));
    const payee = await fund(r.id, 'notary');
    const why = await expectRevert(p, payee, 'BadSignature');
    expect(why.args).toEqual([privateKeyToAddress(other)]);
  });

  it('claimable says nothing about the escrow: one that trusts another signer still reverts', async () => {
    const r = await notarize(alice.api);
    const p = await prepare(alice.client, { request_id: r.id, kind: 'notary' });
    expect(p.claimable).toBe(true);
    const payee = await fund(r.id, 'notary', { signer: privateKeyToAddress(generatePrivateKey()) });
    await expectRevert(p, payee, 'BadSignature');
    const none = await notarize(alice.api);
    const q = await prepare(alice.client, { request_id: none.id, kind: 'notary' });
    expect((await escrow.revertOf(chain.accounts[2]!, q.claim.calldata!))?.name).toBe('NoEscrow'); // never funded
  });
});

describe('the gateway check and the contract agree', () => {
  it('on variants of a real receipt: kinds, fields, job ids, payload edits and signatures', async () => {
    const r = await notarize(alice.api, 'agree-run');
    const other = generatePrivateKey();
    const payloads = [
      r.canonical,
      r.canonical.replace('"kind":"notary"', '"kind":"notary2"'),
      r.canonical.replace('"kind":"notary",', ''),
      r.canonical.replace(`"id":"${r.id}",`, ''),
      r.canonical.replace('{', `{"id":"${r.id}",`), // the job-id field twice
      `[${r.canonical}]`,
      `${r.canonical} `,
      jcs({ ...r.payload, kind: null }),
      jcs({ ...r.payload, id: 7 }),
      jcs({ ...r.payload, note: `","id":"${r.id}"` }),
      jcs({ ...r.payload, note: 'ends in a backslash\\', z: ['kind', { id: r.id, kind: 'notary' }] }),
      `{"a":"\\","id":"${r.id}","k\\"ind":"x","kind":"notary"}`,
      `{"id":"${r.id}","ki\\u006ed":"notary"}`, // a key written with an escape is not "kind"
      `{"id" : "${r.id}","kind":"notary"}`, // whitespace is not the form the gateway signs
      `{"id":"${r.id}","kind":"notary"}}`,
      `{"id":"${r.id}","kind":"notary"`,
    ];
    const terms: Array<{ kind: string; jobField: string; jobId: string }> = [
      { kind: 'notary', jobField: 'id', jobId: r.id },
      { kind: '', jobField: 'id', jobId: r.id },
      { kind: 'notar', jobField: 'id', jobId: r.id },
      { kind: 'notary', jobField: 'id', jobId: r.id.slice(0, -1) },
      { kind: 'notary', jobField: 'seq', jobId: '1' },
      { kind: 'notary', jobField: 'route', jobId: 'POST /v1/notary/receipts' },
    ];
    let compared = 0;
    for (const payload of payloads) {
      const bytes = toHex(new TextEncoder().encode(payload));
      for (const key of [null, other]) {
        const signature = key ? signPersonalMessage(key, payload) : signPersonalMessage(t.gw.signerKey, payload);
        const recovered = await escrow.read<Address>('recoverSigner', [bytes, signature]);
        for (const term of terms) {
          const c = checkClaim({ payload, signature, signer, terms: term });
          const failure = await escrow.read<string>('bindingFailure', [bytes, term.jobField, term.jobId, term.kind]);
          const bindsOnChain = failure === '';
          const bindsHere = c.job.ok && c.kind.ok;
          expect({ payload, term, bindsOnChain }).toEqual({ payload, term, bindsOnChain: bindsHere });
          expect(recovered === signer).toBe(c.signature.ok);
          compared++;
        }
      }
    }
    expect(compared).toBe(payloads.length * 2 * terms.length);
  });

  it('on signature forms: v as 0/1 or 27/28, a high s, a short signature', async () => {
    const r = await notarize(alice.api);
    const bytes = toHex(new TextEncoder().encode(r.canonical));
    const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const v = parseInt(r.signature.slice(130), 16);
    const high = `${r.signature.slice(0, 66)}${(N - BigInt(`0x${r.signature.slice(66, 130)}`)).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`;
    const forms: Array<[string, boolean]> = [
      [r.signature, true],
      [`${r.signature.slice(0, 130)}0${v - 27}`, true],
      [high, false],
      [r.signature.slice(0, 130), false],
      [`${r.signature.slice(0, 130)}1d`, false],
    ];
    for (const [signature, ok] of forms) {
      const c = checkClaim({ payload: r.canonical, signature, signer, terms: { kind: 'notary', jobField: 'id', jobId: r.id } });
      expect(c.signature.ok, signature).toBe(ok);
      expect(await escrow.read<Address>('recoverSigner', [bytes, signature]), signature).toBe(ok ? signer : '0x0000000000000000000000000000000000000000');
    }
  });

  it('on random payloads, canonical and malformed: the same verdict and the same first failure', async () => {
    let seed = 11;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
    const pick = <T,>(a: readonly T[]) => a[Math.floor(rnd() * a.length)]!;
    const chars = ['a', 'b', '_', ' ', '"', '\\', '\n', '{', '}', '[', ']', ',', ':', 'é', '😀', '\u0001'];
    const str = () => (rnd() < 0.3 ? pick(['req_1', 'notary', '']) : Array.from({ length: Math.floor(rnd() * 70) }, () => pick(chars)).join(''));
    const value = (depth: number): unknown => {
      const k = Math.floor(rnd() * (depth > 2 ? 4 : 6));
      if (k === 0 || k === 3) return str();
      if (k === 1) return Math.floor(rnd() * 1e6);
      if (k === 2) return pick([null, true, false]);
      if (k === 4) return Array.from({ length: Math.floor(rnd() * 3) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, () => [pick(['id', 'kind', 'x']), value(depth + 1)]));
    };
    const keys = ['id', 'kind', 'x', 'idx', 'kin', 'i"d', 'padding_key_long_enough_to_cross_a_word'];
    const first: Record<string, string> = {
      payload_not_object: 'payload is not one JSON object',
      job_field_missing: 'no top-level job-id field',
      job_field_repeated: 'job-id field occurs more than once',
      job_id_not_string: 'job-id value differs',
      job_id_not_plain: 'job-id value differs',
      job_id_mismatch: 'job-id value differs',
      kind_declared: 'receipt declares a kind; the escrow expects none',
      kind_missing: 'receipt declares no kind',
      kind_repeated: 'kind occurs more than once',
      kind_mismatch: 'kind differs',
    };
    const sig = signPersonalMessage(t.gw.signerKey, 'unused');
    const seen = new Set<string>();
    for (let n = 0; n < 150; n++) {
      const obj = Object.fromEntries(Array.from({ length: Math.floor(rnd() * 6) }, () => [pick(keys), value(1)]));
      if (rnd() < 0.5) obj.id = 'req_1';
      if (rnd() < 0.5) obj.kind = pick(['notary', '', 'notary2']);
      let text = jcs(obj);
      if (rnd() < 0.25) {
        const at = Math.floor(rnd() * text.length);
        text = rnd() < 0.5 ? text.slice(0, at) + text.slice(at + 1) : text.slice(0, at) + pick(['{', '}', '[', ']', '"', '\\', ',', ' ']) + text.slice(at);
      }
      const bytes = toHex(new TextEncoder().encode(text));
      for (const term of [{ kind: 'notary', jobField: 'id', jobId: 'req_1' }, { kind: '', jobField: 'id', jobId: 'req_1' }]) {
        const c = checkClaim({ payload: text, signature: sig, signer, terms: term });
        const binding = c.reasons.filter((x) => !x.code.startsWith('signature_'));
        const failure = await escrow.read<string>('bindingFailure', [bytes, term.jobField, term.jobId, term.kind]);
        expect({ text, term, failure }).toEqual({ text, term, failure: binding.length ? first[binding[0]!.code] : '' });
        seen.add(binding[0]?.code ?? 'binds');
      }
    }
    expect([...seen].sort()).toEqual(expect.arrayContaining(['binds', 'job_field_missing', 'job_id_mismatch', 'kind_declared', 'kind_mismatch', 'kind_missing', 'payload_not_object']));
  });
});

describe('owner-gated lookups and input checks', () => {
  it("another account's receipt is the same 404 as an unknown one, and nothing is written", async () => {
    const r = await notarize(alice.api);
    const rows = await claimRows();
    const theirs = await expectApiError(prepare(bob.client, { request_id: r.id, kind: 'notary' }), 404, 'not_found');
    const unknown = await expectApiError(prepare(bob.client, { request_id: 'req_doesnotexist000000', kind: 'notary' }), 404, 'not_found');
    expect(theirs.message).toBe(unknown.message);
    const read = await expectApiError(recheck(bob.client, r.id, { kind: 'notary' }), 404, 'not_found');
    expect(read.message).toBe(unknown.message);
    expect(await claimRows()).toBe(rows);
    expect((await trail(bob.client)).claims).toEqual([]);
  });

  it('bad input is a 400 naming the field, and nothing is written', async () => {
    const r = await notarize(alice.api);
    const rows = await claimRows();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ kind: 'notary' }, 'request_id'],
      [{ request_id: '', kind: 'notary' }, 'request_id'],
      [{ request_id: r.id }, 'kind'],
      [{ request_id: r.id, kind: 7 }, 'kind'],
      [{ request_id: r.id, kind: 'no"tary' }, 'kind'],
      [{ request_id: r.id, kind: 'x'.repeat(65) }, 'kind'],
      [{ request_id: r.id, kind: 'notary', job_field: '' }, 'job_field'],
      [{ request_id: r.id, kind: 'notary', job_field: 'kind' }, 'job_field'],
      [{ request_id: r.id, kind: 'notary', job_field: 'a\\b' }, 'job_field'],
      [{ request_id: r.id, kind: 'notary', job_id: '' }, 'job_id'],
      [{ request_id: r.id, kind: 'notary', job_id: 'line\nbreak' }, 'job_id'],
      [{ request_id: r.id, kind: 'notary', escrow: '0x00' }, 'escrow'],
    ];
    for (const [body, param] of cases) {
      const e = await expectApiError(prepare(alice.client, body), 400, 'invalid_request');
      expect(e.param, JSON.stringify(body)).toBe(param);
    }
    // The read-only check needs terms: from the query, or from a claim prepared before.
    const noTerms = await expectApiError(recheck(alice.client, r.id), 400, 'invalid_request');
    expect(noTerms.param).toBe('kind');
    const fieldOnly = await expectApiError(recheck(alice.client, r.id, { job_field: 'id' }), 400, 'invalid_request');
    expect(fieldOnly.param).toBe('kind');
    const badQuery = await expectApiError(recheck(alice.client, r.id, { kind: 'a"b' }), 400, 'invalid_request');
    expect(badQuery.param).toBe('kind');
    expect(await claimRows()).toBe(rows);
  });
});

describe('the trail and the read-only check', () => {
  it('lists your prepared claims newest first with the verdict as prepared; the read-only check recomputes now and writes nothing', async () => {
    const r = await notarize(alice.api);
    t.clock.advance(1_000);
    const first = await prepare(alice.client, { request_id: r.id, kind: 'inference' });
    t.clock.advance(1_000);
    const second = await prepare(alice.client, { request_id: r.id, kind: 'notary', job_id: r.id });
    expect([first.claimable, second.claimable]).toEqual([false, true]);

    const list = await trail(alice.client);
    expect(Object.keys(list).sort()).toEqual(['cap', 'claims', 'count', 'trust_model']);
    expect(list.cap).toBe(200);
    expect(list.count).toBe(list.claims.length);
    expect(list.claims.slice(0, 2).map((c) => [c.id, c.kind, c.claimable])).toEqual([
      [second.id, 'notary', true],
      [first.id, 'inference', false],
    ]);
    expect(list.claims[0]).toMatchObject({ request_id: r.id, job_field: 'id', job_id: r.id, claim_job_id: r.id, reasons: [], recovered_address: signer, payload_hash: sha(r.canonical) });
    expect(list.claims[1]!.reasons.map((x) => x.code)).toEqual(['kind_mismatch']);
    const times = list.claims.map((c) => c.created_at);
    expect([...times].sort().reverse()).toEqual(times);

    // Read-only: terms from the latest prepared claim, recomputed now; the stored verdict stays as prepared.
    const rows = await claimRows();
    const now = await recheck(alice.client, r.id);
    expect(now).toMatchObject({ id: null, claimable: true, escrow: { kind: 'notary', job_field: 'id', job_id: r.id } });
    expect(now.prepared).toMatchObject({ id: second.id, claimable: true });
    expect(now.checked_at).toBe(t.clock.now().toISOString());
    await t.gw.database.db.updateTable('receipts').set({ payload: r.canonical.replace('"kind":"notary"', '"kind":"notarx"') }).where('id', '=', r.id).execute();
    const after = await recheck(alice.client, r.id);
    expect(after.claimable).toBe(false);
    expect(codes(after)).toEqual(['signature_mismatch', 'kind_mismatch']);
    expect(after.prepared).toMatchObject({ id: second.id, claimable: true }); // the trail keeps the verdict as prepared
    const overridden = await recheck(alice.client, r.id, { kind: '', job_field: 'usage_event_id' });
    expect(overridden.escrow).toEqual({ kind: '', job_field: 'usage_event_id', job_id: null });
    expect(codes(overridden)).toEqual(['signature_mismatch', 'kind_declared']);
    expect(await claimRows()).toBe(rows);
    expect((await trail(alice.client)).claims[0]!.id).toBe(second.id);
  });

  it('a receipt is named by its request id or its usage-event id; the claim names the request id', async () => {
    const r = await notarize(alice.api);
    const p = await prepare(alice.client, { request_id: r.payload.usage_event_id, kind: 'notary' });
    expect(p).toMatchObject({ request_id: r.id, claimable: true, claim: { args: { jobId: r.id } } });
    expect((await recheck(alice.client, r.payload.usage_event_id as string)).prepared?.id).toBe(p.id);
  });

  it('the routes take a session: an API key is refused', async () => {
    await expectApiError(alice.api.request('GET', '/v1/escrow/claims'), 401, 'wrong_credential_kind');
    await expectApiError(t.client.request('POST', '/v1/escrow/claims', { body: { request_id: 'x', kind: '' } }), 401, 'authentication_required');
  });
});
