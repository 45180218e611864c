import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { chainLength, expectChainRecomputes, publicChain, register, transfer, type Asset, type Party } from './support/vault.ts';

/**
 * Vault documents and view grants: sealed documents with their sha256 chained, listed by the issuer and
 * (when shared) by holders, deleted with the hash left in the chain; scoped view keys read exactly their
 * scopes, and revoked, expired and unknown keys answer the same 404.
 */
interface Doc { id: string; name: string; sha256: string; size_bytes: number; state: string; shared_with_holders: boolean; chain_seq: number; content_b64?: string }
interface Grant { id: string; token: string; view_url: string; scopes: string[]; state: string; expires_at: string }

let t: TestGateway;
let issuer: Party;
let holder: Party;
let auditor: Party;
let stranger: Party;
beforeAll(async () => {
  t = await startTestGateway();
  [issuer, holder, auditor, stranger] = [await t.signIn(), await t.signIn(), await t.signIn(), await t.signIn()];
}, 120_000);
afterAll(async () => t?.close());

/** Each test's own asset: the issuer's, 100,000,000 held by the holder, the auditor named. */
async function freshAsset(): Promise<Asset> {
  const asset = await register(issuer.client);
  await transfer(issuer.client, { asset_id: asset.id, to_wallet: holder.account.address, amount_micro_usd: 100_000_000 });
  await issuer.client.request('POST', `/v1/vault/assets/${asset.id}/attesters`, { body: { role: 'auditor', account_id: auditor.accountId } });
  return asset;
}

const sha = (b: Buffer) => `0x${createHash('sha256').update(b).digest('hex')}`;
const addDoc = (p: Party, asset: Asset, body: Record<string, unknown>) => p.client.request<Doc>('POST', `/v1/vault/assets/${asset.id}/documents`, { body });
const docs = (p: Party, asset: Asset) => p.client.request<{ documents: Doc[]; asset_id: string }>('GET', `/v1/vault/assets/${asset.id}/documents`);
const docRows = async (asset: Asset) => (await t.gw.database.db.selectFrom('vault_documents').select('id').where('asset_id', '=', asset.id).execute()).length;
const pub = async (path: string) => {
  const res = await fetch(`${t.url}${path}`);
  return { status: res.status, body: (await res.json()) as any };
};

const memo = Buffer.from('Subscription agreement, signed copy');
const report = randomBytes(4096);
const sharedDoc = (asset: Asset) => addDoc(issuer, asset, { name: 'Subscription agreement.pdf', content_type: 'application/pdf', content_b64: memo.toString('base64'), shared_with_holders: true });
const internalDoc = (asset: Asset) => addDoc(issuer, asset, { name: 'Board minutes', content_b64: report.toString('base64') });

describe('vault documents', () => {
  it('stores sealed documents with their sha256 chained; the issuer lists all, a holder the shared ones', async () => {
    const asset = await freshAsset();
    const shared = await sharedDoc(asset);
    const internal = await internalDoc(asset);
    expect(shared).toMatchObject({ object: 'vault_document', sha256: sha(memo), size_bytes: memo.length, state: 'stored', shared_with_holders: true, content_type: 'application/pdf' });
    expect(internal).toMatchObject({ sha256: sha(report), shared_with_holders: false, content_type: 'application/octet-stream' });
    const row = await t.gw.database.db.selectFrom('vault_documents').selectAll().where('id', '=', shared.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.content_sealed!).includes(memo)).toBe(false);
    expect(Buffer.from(row.name_sealed).toString('latin1')).not.toContain('Subscription');
    expect((await publicChain(t, asset.id)).events.find((e) => e.seq === shared.chain_seq)!.type).toBe('document_added');

    expect((await docs(issuer, asset)).documents.map((d) => d.id)).toEqual([internal.id, shared.id]);
    expect((await docs(holder, asset)).documents.map((d) => d.id)).toEqual([shared.id]);
    const fetched = await holder.client.request<Doc>('GET', `/v1/vault/assets/${asset.id}/documents/${shared.id}`);
    expect(Buffer.from(fetched.content_b64!, 'base64').equals(memo)).toBe(true);
    await expectApiError(holder.client.request('GET', `/v1/vault/assets/${asset.id}/documents/${internal.id}`), 404, 'not_found');
    await expectApiError(docs(auditor, asset), 403, 'forbidden');
    await expectApiError(docs(stranger, asset), 404, 'not_found');
  });

  it('refuses a document over the limit (413), bad base64 (400), a holder storing one (403): chain and documents unchanged', async () => {
    const asset = await freshAsset();
    await sharedDoc(asset);
    const before = { length: await chainLength(t, asset.id), listed: await docs(issuer, asset), rows: await docRows(asset) };
    const big = Buffer.alloc(1024 * 1024 + 1, 7).toString('base64');
    const e = await expectApiError(addDoc(issuer, asset, { name: 'big', content_b64: big }), 413, 'payload_too_large');
    expect(e.param).toBe('content_b64');
    expect((await expectApiError(addDoc(issuer, asset, { name: 'x', content_b64: 'not base64!' }), 400, 'invalid_request')).param).toBe('content_b64');
    expect((await expectApiError(addDoc(issuer, asset, { name: '', content_b64: 'AA==' }), 400, 'invalid_request')).param).toBe('name');
    await expectApiError(addDoc(holder, asset, { name: 'x', content_b64: 'AA==' }), 403, 'forbidden');
    await expectApiError(addDoc(stranger, asset, { name: 'x', content_b64: 'AA==' }), 404, 'not_found');
    expect({ length: await chainLength(t, asset.id), listed: await docs(issuer, asset), rows: await docRows(asset) }).toEqual(before);
  });

  it('deletes: the ciphertext destroyed, the sha256 stays listed and chained', async () => {
    const asset = await freshAsset();
    const internal = await internalDoc(asset);
    const d = await issuer.client.request<Doc>('DELETE', `/v1/vault/assets/${asset.id}/documents/${internal.id}`);
    expect(d).toMatchObject({ state: 'deleted', sha256: sha(report) });
    const row = await t.gw.database.db.selectFrom('vault_documents').selectAll().where('id', '=', internal.id).executeTakeFirstOrThrow();
    expect(row.content_sealed).toBeNull();
    await expectApiError(issuer.client.request('GET', `/v1/vault/assets/${asset.id}/documents/${internal.id}`), 410, 'gone');
    const length = await chainLength(t, asset.id);
    expect(await issuer.client.request('DELETE', `/v1/vault/assets/${asset.id}/documents/${internal.id}`)).toMatchObject({ state: 'deleted' });
    expect(await chainLength(t, asset.id)).toBe(length);
    expect((await docs(issuer, asset)).documents.find((x) => x.id === internal.id)).toMatchObject({ state: 'deleted', sha256: sha(report) });
    const chain = await publicChain(t, asset.id);
    expect(chain.events.at(-1)!.type).toBe('document_deleted');
    expectChainRecomputes(chain);
  });
});

describe('vault view grants', () => {
  const mint = (p: Party, asset: Asset, body: Record<string, unknown>) => p.client.request<Grant>('POST', `/v1/vault/assets/${asset.id}/view-grant`, { body });

  it('reads exactly the scopes of a key', async () => {
    const asset = await freshAsset();
    const doc = await sharedDoc(asset);
    const deleted = await internalDoc(asset);
    await issuer.client.request('DELETE', `/v1/vault/assets/${asset.id}/documents/${deleted.id}`);
    const summary = await mint(issuer, asset, { scopes: ['summary'], label: 'prospective buyer' });
    expect(summary.token).toMatch(/^vview-svc_/);
    const s = await pub(`/v1/vault/view/${summary.token}`);
    expect(s.status).toBe(200);
    expect(Object.keys(s.body).sort()).toEqual(['asset_id', 'expires_at', 'object', 'scopes', 'summary']);
    expect(s.body.summary).toMatchObject({ name: asset.name, issued_micro_usd: 1_000_000_000, state: 'open' });
    const refused = await pub(`/v1/vault/view/${summary.token}/documents/${doc.id}`);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'forbidden', param: 'token', reason: 'scope' });

    const full = await mint(issuer, asset, { scopes: ['holders', 'documents'], ttl_seconds: 3600 });
    const f = await pub(`/v1/vault/view/${full.token}`);
    expect(f.body.summary).toBeUndefined();
    expect(f.body.holders).toMatchObject({ asset_id: asset.id, total_micro_usd: 1_000_000_000, pending_claims_micro_usd: 0, issued_micro_usd: 1_000_000_000 });
    expect(f.body.holders.holders.map((h: { account_id: string }) => h.account_id).sort()).toEqual([issuer.accountId, holder.accountId].sort());
    expect(f.body.documents.map((d: Doc) => d.id)).toEqual([doc.id]); // stored documents only
    const got = await pub(`/v1/vault/view/${full.token}/documents/${doc.id}`);
    expect(got.status).toBe(200);
    expect(sha(Buffer.from(got.body.content_b64, 'base64'))).toBe(doc.sha256);
    expect((await pub(`/v1/vault/view/${full.token}/documents/vdoc_unknown`)).status).toBe(404);
  });

  it('lists and revokes grants (issuer only); revoked, expired and unknown keys answer the same 404', async () => {
    const asset = await freshAsset();
    const g = await mint(issuer, asset, { scopes: ['summary'], ttl_seconds: 60 });
    const g2 = await mint(issuer, asset, { scopes: ['summary'] });
    const list = await issuer.client.request<{ grants: Grant[] }>('GET', `/v1/vault/assets/${asset.id}/view-grants`);
    expect(list.grants.map((x) => x.id)).toEqual([g2.id, g.id]);
    expect(list.grants[0]).not.toHaveProperty('token');
    await expectApiError(holder.client.request('GET', `/v1/vault/assets/${asset.id}/view-grants`), 403, 'forbidden');
    await expectApiError(stranger.client.request('GET', `/v1/vault/assets/${asset.id}/view-grants`), 404, 'not_found');
    await expectApiError(holder.client.request('DELETE', `/v1/vault/view-grants/${g2.id}`), 403, 'forbidden');
    await expectApiError(stranger.client.request('DELETE', `/v1/vault/view-grants/${g2.id}`), 404, 'not_found');
    const length = await chainLength(t, asset.id);
    for (const [body, field] of [[{ scopes: [] }, 'scopes'], [{ scopes: ['everything'] }, 'scopes'], [{ scopes: ['summary'], ttl_seconds: 5 }, 'ttl_seconds']] as const) {
      expect((await expectApiError(mint(issuer, asset, body), 400, 'invalid_request')).param).toContain(field);
    }
    expect(await chainLength(t, asset.id)).toBe(length);
    expect((await issuer.client.request<{ grants: Grant[] }>('GET', `/v1/vault/assets/${asset.id}/view-grants`)).grants.map((x) => x.id)).toEqual([g2.id, g.id]);

    expect(await issuer.client.request('DELETE', `/v1/vault/view-grants/${g2.id}`)).toMatchObject({ state: 'revoked' });
    expect(await issuer.client.request('DELETE', `/v1/vault/view-grants/${g2.id}`)).toMatchObject({ state: 'revoked' });
    expect((await publicChain(t, asset.id)).events.at(-1)!.type).toBe('view_grant_revoked');
    expect((await pub(`/v1/vault/view/${g.token}`)).status).toBe(200);
    t.clock.advance(61_000);
    const unknown = await pub('/v1/vault/view/vview-svc_unknown');
    const shape = (r: { status: number; body: any }) => [r.status, r.body.error.type, r.body.error.message];
    expect(unknown.status).toBe(404);
    expect(shape(await pub(`/v1/vault/view/${g.token}`))).toEqual(shape(unknown)); // expired
    expect(shape(await pub(`/v1/vault/view/${g2.token}`))).toEqual(shape(unknown)); // revoked
    expect(shape(await pub(`/v1/vault/view/${g2.token}/documents/vdoc_x`))).toEqual(shape(unknown));
    expect((await issuer.client.request<{ grants: Grant[] }>('GET', `/v1/vault/assets/${asset.id}/view-grants`)).grants.find((x) => x.id === g.id)!.state).toBe('expired');
  });
});
