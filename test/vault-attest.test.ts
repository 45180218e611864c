import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { verifyMessage } from 'ethers';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { chainLength, expectChainRecomputes, publicChain, register, transfer, type Asset, type Party } from './support/vault.ts';

/**
 * Vault attesters, attestations, figures and selective-disclosure proofs. An auditor named by account
 * signs a statement with their wallet and the test verifies both signatures with ethers; a custodian named
 * by a wallet that has no account yet takes the role once that wallet signs in; a NAV figure and a
 * holder's "at least N" proof verify through POST /v1/receipts/verify and reveal nothing else.
 */
interface Attester { id: string; role: string; account_id: string | null; wallet: string | null; state: string }
interface Attestation {
  id: string;
  kind: string;
  role: string;
  statement: string | null;
  value_micro_usd: number | null;
  attester_address: string | null;
  document: Record<string, any>;
  canonical: string;
  signature: string;
  signer: string;
  chain_seq: number;
}
interface Proof { proof: Record<string, any>; canonical: string; signature: string; signer: string }

let t: TestGateway;
let issuer: Party;
let holder: Party;
let auditor: Party;
let stranger: Party;
let signer: string;
const sha = (s: string) => `0x${createHash('sha256').update(s).digest('hex')}`;
const verify = (canonical: string, signature: string) => t.client.request<{ valid: boolean; recovered_address: string; payload: any }>('POST', '/v1/receipts/verify', { body: { receipt: canonical, signature }, credential: null });

beforeAll(async () => {
  t = await startTestGateway();
  [issuer, holder, auditor, stranger] = [await t.signIn(), await t.signIn(), await t.signIn(), await t.signIn()];
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
}, 120_000);
afterAll(async () => t?.close());

/**
 * Each test's own asset: the issuer's, with 250,000,000 transferred to the holder and, unless `auditor` is
 * false, the auditor named (`named`). No test depends on another's.
 */
async function freshAsset(opts: { auditor?: boolean } = {}): Promise<{ asset: Asset; named: Attester | null }> {
  const asset = await register(issuer.client);
  await transfer(issuer.client, { asset_id: asset.id, to_wallet: holder.account.address, amount_micro_usd: 250_000_000 });
  const named = opts.auditor === false ? null : await nameAuditor(asset);
  return { asset, named };
}
const nameAuditor = (asset: Asset) => issuer.client.request<Attester>('POST', `/v1/vault/assets/${asset.id}/attesters`, { body: { role: 'auditor', account_id: auditor.accountId } });
const roster = (p: Party, asset: Asset) => p.client.request<{ attesters: Attester[]; roles: string[] }>('GET', `/v1/vault/assets/${asset.id}/attesters`);
const attestations = (p: Party, asset: Asset) => p.client.request<{ attestations: Attestation[]; trust_model: string }>('GET', `/v1/vault/assets/${asset.id}/attestations`);
/** The message an auditor's wallet signs for `statement` on `asset`. */
const statementMessage = (asset: Asset, statement: string) => canonicalize({ type: 'svc.vault_attester_statement', version: 1, asset_id: asset.id, role: 'auditor', kind: 'statement', statement_sha256: sha(statement) })!;
/** The auditor records `statement`, signed by their wallet. */
async function recordStatement(asset: Asset, statement: string): Promise<Attestation> {
  const attester_signature = await auditor.account.signMessage({ message: statementMessage(asset, statement) });
  return auditor.client.request<Attestation>('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement, attester_signature } });
}

describe('vault attesters and attestations', () => {
  it('names attesters by account and by wallet; the issuer sees the roster, an attester their own, a holder 403, a stranger 404', async () => {
    const { asset } = await freshAsset({ auditor: false });
    const named = await nameAuditor(asset);
    expect(named).toMatchObject({ object: 'vault_attester', role: 'auditor', account_id: auditor.accountId, wallet: null, state: 'active' });
    const custodianWallet = privateKeyToAccount(generatePrivateKey());
    await issuer.client.request('POST', `/v1/vault/assets/${asset.id}/attesters`, { body: { role: 'custodian', wallet: custodianWallet.address } });
    const length = await chainLength(t, asset.id);
    const refusals: Array<[Record<string, unknown>, number, string]> = [
      [{ role: 'auditor', account_id: auditor.accountId }, 409, 'conflict'],
      [{ role: 'auditor' }, 400, 'invalid_request'],
      [{ role: 'auditor', account_id: auditor.accountId, wallet: custodianWallet.address }, 400, 'invalid_request'],
      [{ role: 'auditor', account_id: 'acct_nobody' }, 400, 'invalid_request'],
      [{ role: 'notary', account_id: auditor.accountId }, 400, 'invalid_request'],
      [{ role: 'legal', account_id: issuer.accountId }, 400, 'invalid_request'],
    ];
    for (const [body, status, type] of refusals) await expectApiError(issuer.client.request('POST', `/v1/vault/assets/${asset.id}/attesters`, { body }), status, type);
    await expectApiError(holder.client.request('POST', `/v1/vault/assets/${asset.id}/attesters`, { body: { role: 'legal', account_id: stranger.accountId } }), 403, 'forbidden');
    expect(await chainLength(t, asset.id)).toBe(length);

    expect((await roster(issuer, asset)).attesters.map((a) => a.role)).toEqual(['auditor', 'custodian']);
    expect((await roster(auditor, asset)).attesters).toEqual([named]);
    expect((await roster(issuer, asset)).roles).toEqual(['auditor', 'custodian', 'appraiser', 'legal']);
    await expectApiError(roster(holder, asset), 403, 'forbidden');
    await expectApiError(roster(stranger, asset), 404, 'not_found');
    // The custodian's wallet signs in later: its new account holds the role.
    const custodian = await t.signIn(custodianWallet);
    expect((await roster(custodian, asset)).attesters.map((a) => [a.role, a.wallet])).toEqual([['custodian', custodianWallet.address]]);
    const fig = await custodian.client.request<Attestation>('POST', `/v1/vault/assets/${asset.id}/nav`, { body: { kind: 'reserves', value_micro_usd: 1_000_000_000, as_of: t.clock.now().toISOString() } });
    expect(fig).toMatchObject({ kind: 'reserves', role: 'custodian', value_micro_usd: 1_000_000_000 });
  });

  it("records an auditor's statement signed by their wallet: ethers verifies the wallet's and the gateway's signatures", async () => {
    const { asset } = await freshAsset();
    const statement = 'We audited the 2026 accounts of the fund and found them fairly stated.';
    const message = statementMessage(asset, statement);
    const attester_signature = await auditor.account.signMessage({ message });
    const a = await auditor.client.request<Attestation>('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement, attester_signature } });
    expect(a).toMatchObject({ kind: 'statement', role: 'auditor', statement, attester_address: auditor.account.address, signer });
    expect(a.document).toMatchObject({ type: 'svc.vault_attestation', asset_id: asset.id, statement_sha256: sha(statement), attester: { address: auditor.account.address, message, signature: attester_signature }, chain_seq: a.chain_seq });
    // With ethers, from the record alone: the wallet signed the message, the gateway signed the canonical document.
    expect(verifyMessage(a.document.attester.message, a.document.attester.signature)).toBe(auditor.account.address);
    expect(verifyMessage(a.canonical, a.signature)).toBe(signer);
    expect(canonicalize(a.document)).toBe(a.canonical);
    expect(await verify(a.canonical, a.signature)).toMatchObject({ valid: true, recovered_address: signer });
    expect((await publicChain(t, asset.id)).events.find((e) => e.seq === a.chain_seq)!.type).toBe('attestation_recorded');
    // Statements are sealed at rest.
    const row = await t.gw.database.db.selectFrom('vault_attestations').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.content_sealed!).toString('latin1')).not.toContain('audited');
    // The issuer and the holder read it; a stranger gets 404.
    for (const p of [issuer, holder, auditor]) expect((await attestations(p, asset)).attestations.map((x) => x.id)).toContain(a.id);
    await expectApiError(attestations(stranger, asset), 404, 'not_found');
  });

  it('refuses a signature from another wallet (400), a holder without a role (403), a stranger (404): nothing chained or recorded', async () => {
    const { asset } = await freshAsset();
    const statement = 'Reserves are held at the custodian.';
    const message = statementMessage(asset, statement);
    const length = await chainLength(t, asset.id);
    const recorded = (await attestations(issuer, asset)).attestations;
    const wrong = await holder.account.signMessage({ message });
    expect((await expectApiError(auditor.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement, attester_signature: wrong } }), 400, 'invalid_request')).param).toBe('attester_signature');
    const other = await auditor.account.signMessage({ message: `${message} ` });
    expect((await expectApiError(auditor.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement, attester_signature: other } }), 400, 'invalid_request')).param).toBe('attester_signature');
    await expectApiError(auditor.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement, role: 'legal' } }), 403, 'forbidden');
    await expectApiError(holder.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement } }), 403, 'forbidden');
    await expectApiError(issuer.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement } }), 403, 'forbidden');
    await expectApiError(stranger.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement } }), 404, 'not_found');
    expect((await expectApiError(issuer.client.request('POST', `/v1/vault/assets/${asset.id}/nav`, { body: { kind: 'nav', value_micro_usd: 1, as_of: new Date(t.clock.now().getTime() + 86_400_000).toISOString() } }), 400, 'invalid_request')).param).toBe('as_of');
    expect(await chainLength(t, asset.id)).toBe(length);
    expect((await attestations(issuer, asset)).attestations).toEqual(recorded);
  });

  it('records a NAV figure as a signed proof verifiable through receipt verification', async () => {
    const { asset } = await freshAsset({ auditor: false });
    const nav = await issuer.client.request<Attestation>('POST', `/v1/vault/assets/${asset.id}/nav`, { body: { kind: 'nav', value_micro_usd: 1_050_000_000, as_of: t.clock.now().toISOString(), basis: 'Appraisal of 2026-10-01' } });
    expect(nav).toMatchObject({ kind: 'nav', role: 'issuer', attester_id: null, value_micro_usd: 1_050_000_000, attester_address: null });
    expect(nav.document).toMatchObject({ type: 'svc.vault_figure', kind: 'nav', value_micro_usd: 1_050_000_000, basis_sha256: sha('Appraisal of 2026-10-01') });
    const v = await verify(nav.canonical, nav.signature);
    expect(v).toMatchObject({ valid: true, recovered_address: signer, payload: { attestation_id: nav.id, asset_id: asset.id } });
    expect((await verify(nav.canonical.replace('1050000000', '1150000000'), nav.signature)).valid).toBe(false);
  });

  it('revokes a role: the attester loses access, the statements they recorded stand', async () => {
    const { asset, named } = await freshAsset();
    const statement = await recordStatement(asset, 'The fund holds what it says it holds.');
    const revoked = await issuer.client.request<Attester>('DELETE', `/v1/vault/assets/${asset.id}/attesters/${named!.id}`);
    expect(revoked).toMatchObject({ state: 'revoked' });
    expect(await issuer.client.request('DELETE', `/v1/vault/assets/${asset.id}/attesters/${named!.id}`)).toMatchObject({ state: 'revoked' });
    await expectApiError(issuer.client.request('DELETE', `/v1/vault/assets/${asset.id}/attesters/vatr_unknown`), 404, 'not_found');
    await expectApiError(roster(auditor, asset), 404, 'not_found');
    await expectApiError(auditor.client.request('POST', `/v1/vault/assets/${asset.id}/attestations`, { body: { statement: 'late' } }), 404, 'not_found');
    const list = await attestations(issuer, asset);
    expect(list.attestations.filter((x) => x.role === 'auditor').map((x) => x.id)).toEqual([statement.id]);
    expect(list.trust_model).toContain('Neither signature makes a statement or a figure true');
    expectChainRecomputes(await publicChain(t, asset.id));
  });
});

describe('selective-disclosure proofs', () => {
  it('signs "holds at least N" for a holder, verifiable through receipt verification, revealing nothing else', async () => {
    const { asset } = await freshAsset({ auditor: false });
    const p = await holder.client.request<Proof>('POST', '/v1/vault/proofs', { body: { asset_id: asset.id, amount_micro_usd: 200_000_000 } });
    expect(p.proof).toMatchObject({ type: 'svc.vault_disclosure', statement: 'holds_at_least', subject: { wallet: holder.account.address }, asset_id: asset.id, amount_micro_usd: 200_000_000, signer });
    const chain = await publicChain(t, asset.id);
    expect(p.proof.chain).toEqual({ length: chain.length, head: chain.head });
    const v = await verify(p.canonical, p.signature);
    expect(v).toMatchObject({ valid: true, recovered_address: signer });
    expect(verifyMessage(p.canonical, p.signature)).toBe(signer);
    // Nothing else: not the amount held (250,000,000), not the name, not the other holders.
    for (const s of ['250000000', asset.name, issuer.accountId, holder.accountId, issuer.account.address]) expect(p.canonical).not.toContain(s);
  });

  it('refuses more than the position (409), a wallet not the caller\'s (400), a caller with no part in the asset (404): the chain unchanged', async () => {
    const { asset } = await freshAsset({ auditor: false });
    const length = await chainLength(t, asset.id);
    const body = { asset_id: asset.id, amount_micro_usd: 250_000_001 };
    expect((await expectApiError(holder.client.request('POST', '/v1/vault/proofs', { body }), 409, 'conflict')).param).toBe('amount_micro_usd');
    expect((await expectApiError(holder.client.request('POST', '/v1/vault/proofs', { body: { ...body, amount_micro_usd: 1, wallet: issuer.account.address } }), 400, 'invalid_request')).param).toBe('wallet');
    await expectApiError(stranger.client.request('POST', '/v1/vault/proofs', { body: { ...body, amount_micro_usd: 1 } }), 404, 'not_found');
    await expectApiError(holder.client.request('POST', '/v1/vault/proofs', { body: { ...body, amount_micro_usd: 0 } }), 400, 'invalid_request');
    expect(await chainLength(t, asset.id)).toBe(length);
  });
});
