import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { redactUrl } from '../control-plane/src/http/log-redaction.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * Relays end to end: sealed temporary shares created with a session, opened by their link secret (and PIN),
 * objects fetched with the grant of an open; expired, revoked, capped, locked and unknown links answering
 * one and the same 404; wrong PINs counted until the relay locks; view-only relays served inline with nosniff
 * and a restrictive CSP. Time moves with the injected clock.
 */
let t: TestGateway;
let owner: SvcClient;

const TEXT = 'Quarterly numbers: 42\n';
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
const objects = [
  { name: 'notes.txt', content_type: 'text/plain; charset=utf-8', content_b64: Buffer.from(TEXT).toString('base64') },
  { name: 'pixel.png', content_type: 'image/png', content_b64: PNG.toString('base64') },
];

beforeAll(async () => {
  t = await startTestGateway();
  owner = (await t.signIn()).client;
}, 120_000);
afterAll(async () => t?.close());

const create = (body: Record<string, unknown>) => owner.request<any>('POST', '/v1/relays', { body: { objects, ...body } });
const secretOf = (shareUrl: string) => new URL(shareUrl).pathname.split('/').pop()!;
const open = (secret: string, body: Record<string, unknown> = {}) =>
  fetch(`${t.url}/v1/relay-access/${secret}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const fetchObject = (secret: string, id: string, grant: string) =>
  fetch(`${t.url}/v1/relay-access/${secret}/objects/${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant }) });

/** The uniform 404 every dead link answers: same status, type and message. */
async function dead(res: Response) {
  expect(res.status).toBe(404);
  const body = (await res.json()) as any;
  return { type: body.error.type, message: body.error.message, keys: Object.keys(body.error).sort() };
}

describe('creating and listing', () => {
  it('refuses bad input naming the field, and writes nothing', async () => {
    expect((await expectApiError(create({ pin: '12a4' }), 400, 'invalid_request')).param).toBe('pin');
    expect((await expectApiError(create({ objects: [] }), 400, 'invalid_request')).param).toBe('objects');
    expect((await expectApiError(create({ expires_in_seconds: 30 * 24 * 3600 }), 400, 'invalid_request')).param).toBe('expires_in_seconds');
    expect((await expectApiError(create({ max_accesses: 0 }), 400, 'invalid_request')).param).toBe('max_accesses');
    const pdf = [{ name: 'x.pdf', content_type: 'application/pdf', content_b64: 'AAAA' }];
    expect((await expectApiError(create({ objects: pdf, view_only: true }), 400, 'invalid_request')).param).toBe('objects[0].content_type');
    expect((await expectApiError(create({ objects: [{ ...objects[0], name: '../etc/passwd' }] }), 400, 'invalid_request')).param).toBe('objects[0].name');
    expect((await owner.request<any>('GET', '/v1/relays')).relays).toEqual([]);
  });

  it('creates a sealed share with a one-time link; lists metadata only', async () => {
    const r = await create({ pin: '4821', max_accesses: 2 });
    expect(r).toMatchObject({ status: 'active', pin_protected: true, view_only: false, max_accesses: 2, accesses: 0, object_count: 2, total_bytes: Buffer.byteLength(TEXT) + PNG.length });
    expect(r.share_url).toMatch(new RegExp(`^${t.url}/v1/relay-access/rls_`));
    expect(r.objects[0]).toMatchObject({ name: 'notes.txt', bytes: Buffer.byteLength(TEXT), sha256: sha256Hex(TEXT) });
    const list = await owner.request<any>('GET', '/v1/relays');
    expect(list.relays[0].id).toBe(r.id);
    expect(JSON.stringify(list)).not.toContain(secretOf(r.share_url));
    expect(list.relays[0]).not.toHaveProperty('share_url');
    const raw = await t.gw.database.db.selectFrom('relay_objects').select('content_sealed').where('relay_id', '=', r.id).execute();
    expect(Buffer.from(raw[0]!.content_sealed!).includes(Buffer.from('Quarterly'))).toBe(false);
    expect(redactUrl(`/v1/relay-access/${secretOf(r.share_url)}`)).toBe('/v1/relay-access/[redacted]');
  });
});

describe('opening a link', () => {
  it('opens with its PIN, serves the objects, then refuses after its cap with the same 404 as every dead link', async () => {
    const r = await create({ pin: '4821', max_accesses: 1 });
    const secret = secretOf(r.share_url);
    const wrong = await open(secret, { pin: '0000' });
    expect(wrong.status).toBe(403);
    expect(((await wrong.json()) as any).error).toMatchObject({ type: 'forbidden', reason: 'wrong_pin', attempts_left: 4 });
    const ok = await open(secret, { pin: '4821' });
    expect(ok.status).toBe(200);
    const opened = (await ok.json()) as any;
    expect(opened).toMatchObject({ accesses: 1, max_accesses: 1, view_only: false });
    const text = await fetchObject(secret, opened.objects[0].id, opened.grant);
    expect(text.status).toBe(200);
    expect(await text.text()).toBe(TEXT);
    expect(text.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''notes.txt");
    expect(text.headers.get('x-content-type-options')).toBe('nosniff');
    expect(text.headers.get('content-security-policy')).toContain('sandbox');
    const png = await fetchObject(secret, opened.objects[1].id, opened.grant);
    expect(Buffer.from(await png.arrayBuffer())).toEqual(PNG);

    const capped = await dead(await open(secret, { pin: '4821' }));
    const unknown = await dead(await open('rls_not-a-secret-anyone-was-given'));
    expect(capped).toEqual(unknown);
    // Expired
    const e = await create({ expires_in_seconds: 60 });
    t.clock.advance(61_000);
    expect(await dead(await open(secretOf(e.share_url)))).toEqual(unknown);
    // Revoked: ciphertext destroyed at once
    const v = await create({});
    const revoked = await owner.request<any>('POST', `/v1/relays/${v.id}/revoke`);
    expect(revoked).toMatchObject({ status: 'revoked', content_destroyed: true });
    const rows = await t.gw.database.db.selectFrom('relay_objects').select('content_sealed').where('relay_id', '=', v.id).execute();
    expect(rows.every((x) => x.content_sealed === null)).toBe(true);
    expect(await dead(await open(secretOf(v.share_url)))).toEqual(unknown);
    // A grant of a dead or other relay fetches nothing.
    expect(await dead(await fetchObject(secret, opened.objects[0].id, 'rlg_forged'))).toEqual(unknown);

    const list = (await owner.request<any>('GET', '/v1/relays')).relays as any[];
    const byId = (id: string) => list.find((x) => x.id === id);
    expect(byId(r.id)).toMatchObject({ status: 'exhausted', accesses: 1, failed_pin_attempts: 1 });
    expect(byId(e.id)).toMatchObject({ status: 'expired', content_destroyed: true });
    expect(byId(v.id)).toMatchObject({ status: 'revoked' });
  });

  it('locks for good after repeated wrong PINs (the fifth), destroying the ciphertext', async () => {
    const r = await create({ pin: '913377', max_accesses: 5 });
    const secret = secretOf(r.share_url);
    for (let left = 4; left >= 1; left--) {
      const res = await open(secret, { pin: '000000' });
      expect(res.status).toBe(403);
      expect(((await res.json()) as any).error.attempts_left).toBe(left);
    }
    const unknown = await dead(await open('rls_unknown'));
    expect(await dead(await open(secret, { pin: '000000' }))).toEqual(unknown);
    expect(await dead(await open(secret, { pin: '913377' }))).toEqual(unknown);
    const listed = (await owner.request<any>('GET', '/v1/relays')).relays.find((x: any) => x.id === r.id);
    expect(listed).toMatchObject({ status: 'locked', failed_pin_attempts: 5, content_destroyed: true });
  });

  it('serves a view-only relay inline with nosniff and a restrictive CSP', async () => {
    const r = await create({ view_only: true, max_accesses: 3 });
    const secret = secretOf(r.share_url);
    const opened = (await (await open(secret)).json()) as any;
    expect(opened.view_only).toBe(true);
    const png = await fetchObject(secret, opened.objects[1].id, opened.grant);
    expect(png.status).toBe(200);
    expect(png.headers.get('content-type')).toBe('image/png');
    expect(png.headers.get('content-disposition')).toBe("inline; filename*=UTF-8''pixel.png");
    expect(png.headers.get('x-content-type-options')).toBe('nosniff');
    expect(png.headers.get('content-security-policy')).toBe("default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox");
    expect(png.headers.get('cache-control')).toBe('no-store');
    const other = await create({ max_accesses: 1 });
    const otherOpened = (await (await open(secretOf(other.share_url))).json()) as any;
    // A grant belongs to its relay.
    expect((await fetchObject(secret, opened.objects[0].id, otherOpened.grant)).status).toBe(404);
  });

  it('revoke is the owner\'s only and idempotent', async () => {
    const r = await create({});
    const other = (await t.signIn()).client;
    await expectApiError(other.request('POST', `/v1/relays/${r.id}/revoke`), 404, 'not_found');
    expect((await owner.request<any>('POST', `/v1/relays/${r.id}/revoke`)).status).toBe('revoked');
    expect((await owner.request<any>('POST', `/v1/relays/${r.id}/revoke`)).status).toBe('revoked');
  });
});
