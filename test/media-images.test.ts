import { createHash } from 'node:crypto';
import { crc32, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Wallet, verifyMessage } from 'ethers';
import canonicalizeJson from 'canonicalize';
import { RECEIPT_HEADERS } from '@svc/shared';
import { loadConfig } from '../control-plane/src/config.ts';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startMediaUpstream, type MediaUpstream } from './support/media-upstream.ts';

/**
 * Image generation through a configured provider (a real OpenAI-images server on loopback), called with
 * the official `openai` client; billing enforced. Each image carries a signed provenance manifest in an
 * iTXt chunk; /v1/images/verify checks manifest, signature and hash independently.
 */
const PER_IMAGE = 40_000;
const SMALL = 25_000;
let up: MediaUpstream;
let t: TestGateway;
let acct: { accountId: string; key: string };
let oa: OpenAI;

beforeAll(async () => {
  up = await startMediaUpstream();
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_MEDIA_TIMEOUT_SECONDS: '5',
      SVC_IMAGE_PROVIDERS: JSON.stringify([
        {
          name: 'pics',
          base_url: up.url,
          api_key: 'sk-images-upstream',
          models: [
            { id: 'test-image', price_micro_usd_per_image: PER_IMAGE, size_prices: { '512x512': SMALL }, sizes: ['1024x1024', '512x512'], max_n: 4 },
            { id: 'test-image-native', price_micro_usd_per_image: 1_000, sizes: ['1024x1024'], send_response_format: false },
          ],
        },
      ]),
      SVC_VIDEO_PROVIDERS: JSON.stringify([{ name: 'vids', base_url: up.url, models: [{ id: 'test-video', price_micro_usd_per_second: 1_000, max_seconds: 12, seconds: [4, 8, 12], resolutions: ['1280x720', '720x1280', '1792x1024'] }] }]),
    },
  });
  acct = await funded(1_000_000);
  oa = new OpenAI({ apiKey: acct.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});
beforeEach(() => up.reset());

const funded = (micro: number) => fundedKey(t, micro);
const position = (id: string) => t.gw.services.metering.position(id);
/** Balance and holds, without what leases set aside (a lease unused for 2 s is given back at any moment). */
const money = async (id: string) => {
  const { leased_micro_usd: _, ...rest } = await position(id);
  return rest;
};
const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');
async function post(path: string, body: unknown, key?: string) {
  const res = await fetch(t.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any, headers: res.headers };
}
const verify = (body: unknown, path = '/v1/images/verify') => post(path, body);

/** The chunks of a PNG, each CRC checked independently of the gateway's code. */
function chunks(png: Buffer) {
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  const out: Array<{ type: string; data: Buffer; start: number }> = [];
  for (let at = 8; at < png.length; ) {
    const len = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + len);
    expect(png.readUInt32BE(at + 8 + len), `CRC of ${type}`).toBe(crc32(png.subarray(at + 4, at + 8 + len)) >>> 0);
    out.push({ type, data, start: at });
    at += 12 + len;
  }
  return out;
}
/** A PNG with one chunk's data changed and, if asked, its CRC fixed (a careful tamperer). */
function tamper(png: Buffer, type: string, fixCrc: boolean): Buffer {
  const out = Buffer.from(png);
  const c = chunks(png).find((x) => x.type === type)!;
  const at = c.start + 8 + (c.data.length >> 1);
  out[at] = out[at]! ^ 0x01;
  if (fixCrc) out.writeUInt32BE(crc32(out.subarray(c.start + 4, c.start + 8 + c.data.length)) >>> 0, c.start + 8 + c.data.length);
  return out;
}
/** An iTXt chunk built by hand: keyword, NUL, flag, method, NUL, NUL, text. */
function itxtChunk(keyword: string, text: string): Buffer {
  const data = Buffer.concat([Buffer.from(keyword, 'latin1'), Buffer.from([0, 0, 0, 0, 0]), Buffer.from(text, 'utf8')]);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from('iTXt'), data])) >>> 0);
  return Buffer.concat([len, Buffer.from('iTXt'), data, crc]);
}

describe('configuration', () => {
  it('SVC_IMAGE_PROVIDERS and SVC_VIDEO_PROVIDERS are checked at boot with the failing path named', () => {
    const base = { SVC_DATA_DIR: '/tmp/x' };
    const img = (v: unknown) => () => loadConfig({ ...base, SVC_IMAGE_PROVIDERS: JSON.stringify(v) });
    const m = { id: 'm', price_micro_usd_per_image: 1, sizes: ['64x64'] };
    expect(img([{ name: 'a', base_url: 'http://x/v1', models: [{ ...m, sizes: ['big'] }] }])).toThrow(/SVC_IMAGE_PROVIDERS: \[0\]\.models\[0\]\.sizes\[0\]: must be WIDTHxHEIGHT/);
    expect(img([{ name: 'a', base_url: 'http://x/v1', models: [m] }, { name: 'b', base_url: 'http://y/v1', models: [m] }])).toThrow(/model m is already served by provider a/);
    expect(img([{ name: 'a', base_url: 'http://x/v1', models: [{ ...m, price_micro_usd_per_image: 0.5 }] }])).toThrow(/price_micro_usd_per_image/);
    const vid = (models: unknown[]) => () => loadConfig({ ...base, SVC_VIDEO_PROVIDERS: JSON.stringify([{ name: 'v', base_url: 'http://x/v1', models }]) });
    expect(vid([{ id: 'v', price_micro_usd_per_second: 1, max_seconds: 8, seconds: [4, 12], resolutions: ['1280x720'] }])).toThrow(/SVC_VIDEO_PROVIDERS: \[0\]\.models\[0\]\.seconds\[1\]: exceeds max_seconds 8/);
    expect(() => loadConfig({ ...base, SVC_VIDEO_PROVIDERS: 'nope' })).toThrow(/SVC_VIDEO_PROVIDERS: must be a JSON array of video providers/);
    const c = loadConfig({ ...base, SVC_VIDEO_PROVIDERS: JSON.stringify([{ name: 'v', base_url: 'http://x/v1/', models: [{ id: 'v', price_micro_usd_per_second: 3, max_seconds: 8, resolutions: ['1280x720'] }] }]) });
    expect(c.media.videoProviders).toEqual([{ name: 'v', baseUrl: 'http://x/v1', apiKey: undefined, models: [{ id: 'v', pricePerSecondMicroUsd: 3, maxSeconds: 8, seconds: null, defaultSeconds: 8, resolutions: ['1280x720'] }] }]);
  });
});

describe('catalogs', () => {
  it('list the configured image and video models with their prices and options', async () => {
    const images = await (await fetch(`${t.url}/v1/images/models`)).json();
    expect(images).toEqual({
      object: 'list',
      data: [
        { id: 'test-image', object: 'model', created: expect.any(Number), owned_by: 'pics', pricing: { per_image_micro_usd: PER_IMAGE, per_size_micro_usd: { '1024x1024': PER_IMAGE, '512x512': SMALL } }, sizes: ['1024x1024', '512x512'], default_size: '1024x1024', max_n: 4 },
        { id: 'test-image-native', object: 'model', created: expect.any(Number), owned_by: 'pics', pricing: { per_image_micro_usd: 1_000, per_size_micro_usd: { '1024x1024': 1_000 } }, sizes: ['1024x1024'], default_size: '1024x1024', max_n: 10 },
      ],
    });
    const videos = (await (await fetch(`${t.url}/v1/videos/models`)).json()) as { data: unknown[] };
    expect(videos.data).toEqual([
      { id: 'test-video', object: 'model', created: expect.any(Number), owned_by: 'vids', pricing: { per_second_micro_usd: 1_000 }, max_seconds: 12, seconds: [4, 8, 12], default_seconds: 4, resolutions: ['1280x720', '720x1280', '1792x1024'], default_resolution: '1280x720', aspect_ratios: ['16:9', '9:16', '7:4'] },
    ]);
  });
});

describe('POST /v1/images/generations (openai client)', () => {
  it('holds n images, charges per image at the size price, embeds a signed manifest in each PNG with correct CRCs', async () => {
    const before = await money(acct.accountId);
    const { data, response } = await oa.images.generate({ model: 'test-image', prompt: 'a red fox', n: 2, size: '512x512' as '1024x1024' }).withResponse();
    expect(data.data).toHaveLength(2);
    const seen = up.requests.at(-1)!;
    expect(seen).toMatchObject({ method: 'POST', path: '/v1/images/generations', authorization: 'Bearer sk-images-upstream', body: { model: 'test-image', prompt: 'a red fox', n: 2, size: '512x512', response_format: 'b64_json' } });
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(2 * SMALL));
    const canonical = Buffer.from(response.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
    expect(verifyMessage(canonical, response.headers.get(RECEIPT_HEADERS.signature)!)).toBe(t.gw.services.signer.address);
    const receipt = JSON.parse(canonical);
    const originals = up.images.map((b) => Buffer.from(b, 'base64'));
    expect(receipt).toMatchObject({ kind: 'image', model: 'test-image', route: 'POST /v1/images/generations', units: { images: 2 }, cost_micro_usd: 2 * SMALL, detail: { size: '512x512', requested: 2, asset_sha256: originals.map((o) => sha256(o)) } });
    expect(await position(acct.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - 2 * SMALL, held_micro_usd: 0 });

    for (const [i, item] of data.data!.entries()) {
      const png = Buffer.from(item.b64_json!, 'base64');
      const cs = chunks(png);
      expect(cs.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'iTXt', 'IEND']);
      const itxt = cs[2]!.data;
      expect(itxt.subarray(0, 19).toString('latin1')).toBe('svc-provenance\0\0\0\0\0');
      const { manifest, signature } = JSON.parse(itxt.subarray(19).toString('utf8'));
      expect(manifest).toEqual({
        v: 1, type: 'svc.provenance', media_type: 'image/png', asset_sha256: sha256(originals[i]!), model: 'test-image', created_at: expect.any(String),
        request_id: receipt.id, receipt_id: receipt.id, receipt_hash: `0x${sha256(canonical)}`, signer: t.gw.services.signer.address, index: i,
      });
      expect(verifyMessage(canonicalizeJson(manifest)!, signature)).toBe(t.gw.services.signer.address);
      // Without the manifest chunk the file is the upstream's, pixel for pixel.
      expect(Buffer.concat([png.subarray(0, cs[2]!.start), png.subarray(cs[3]!.start)]).equals(originals[i]!)).toBe(true);
      expect(inflateSync(cs[1]!.data).length).toBe(16 * (1 + 16 * 3));
      expect((item as any).provenance).toEqual({ manifest, signature, embedded: true });
    }
  });

  it('charges only the images the provider returned; a model that refuses response_format is not sent it', async () => {
    up.switches.imageCount = 1;
    const before = await money(acct.accountId);
    const { data, response } = await oa.images.generate({ model: 'test-image', prompt: 'three owls', n: 3 }).withResponse();
    expect(data.data).toHaveLength(1);
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(PER_IMAGE));
    expect(await position(acct.accountId)).toMatchObject({ balance_micro_usd: before.balance_micro_usd - PER_IMAGE, held_micro_usd: 0 });
    up.switches.imageCount = null;
    await oa.images.generate({ model: 'test-image-native', prompt: 'x' });
    expect(up.requests.at(-1)!.body).not.toHaveProperty('response_format');
  });

  it('answers 402 with payment terms before any upstream call when n images cannot be held', async () => {
    const poor = await funded(PER_IMAGE * 2 - 1);
    const client = new OpenAI({ apiKey: poor.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const err = await client.images.generate({ model: 'test-image', prompt: 'two cats', n: 2 }).catch((e) => e);
    expect(err).toMatchObject({ status: 402, error: { type: 'insufficient_credit', required_micro_usd: 2 * PER_IMAGE, accepts: [expect.objectContaining({ scheme: 'exact' })] } });
    expect(up.requests).toHaveLength(0);
    expect(await position(poor.accountId)).toMatchObject({ balance_micro_usd: PER_IMAGE * 2 - 1, held_micro_usd: 0 });
    await client.images.generate({ model: 'test-image', prompt: 'one cat', n: 1 });
    expect(await position(poor.accountId)).toMatchObject({ balance_micro_usd: PER_IMAGE - 1, held_micro_usd: 0 });
  });

  it('refuses bad input with 4xx naming the field, before holding or calling upstream', async () => {
    const before = await money(acct.accountId);
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ model: 'test-image', prompt: 'x', n: 0 }, 400, 'n'],
      [{ model: 'test-image', prompt: 'x', n: 5 }, 400, 'n'],
      [{ model: 'test-image', prompt: 'x', size: '256x256' }, 400, 'size'],
      [{ model: 'test-image', prompt: 'x', response_format: 'url' }, 400, 'response_format'],
      [{ model: 'test-image', prompt: '' }, 400, 'prompt'],
      [{ model: 'test-image' }, 400, 'prompt'],
      [{ model: 'no-such-model', prompt: 'x' }, 404, 'model'],
      [{ model: 'test-video', prompt: 'x' }, 404, 'model'],
    ];
    for (const [body, status, param] of cases) {
      const r = await post('/v1/images/generations', body, acct.key);
      expect({ status: r.status, param: r.body.error?.param }, JSON.stringify(body)).toEqual({ status, param });
      expect(r.body.error.request_id).toMatch(/^req_/);
    }
    expect(up.requests).toHaveLength(0);
    expect(await money(acct.accountId)).toEqual(before);
  });

  it('an upstream failure releases the hold and charges nothing (5xx -> 502, refusal -> 400)', async () => {
    const before = await money(acct.accountId);
    up.switches.failWith = 500;
    expect(await oa.images.generate({ model: 'test-image', prompt: 'x' }).catch((e) => e)).toMatchObject({ status: 502, error: { type: 'upstream_error' } });
    up.switches.failWith = 400;
    expect(await oa.images.generate({ model: 'test-image', prompt: 'x' }).catch((e) => e)).toMatchObject({ status: 400, error: { type: 'invalid_request', message: expect.stringContaining('rejected by the safety system') } });
    expect(await money(acct.accountId)).toEqual(before);
  });

  it('a non-PNG image keeps its bytes and carries the manifest beside it', async () => {
    up.switches.jpeg = true;
    const r = await oa.images.generate({ model: 'test-image', prompt: 'a jpeg' });
    const item = r.data![0]! as any;
    expect(Buffer.from(item.b64_json, 'base64').equals(Buffer.from(up.images[0]!, 'base64'))).toBe(true);
    expect(item.provenance).toMatchObject({ embedded: false, manifest: { media_type: 'image/jpeg', asset_sha256: sha256(Buffer.from(up.images[0]!, 'base64')) } });
    const v = await verify({ asset_b64: item.b64_json, manifest: item.provenance.manifest, signature: item.provenance.signature });
    expect(v.body).toMatchObject({ manifest_found: true, manifest_source: 'supplied', signature_valid: true, hash_matches: true, verified: true });
    expect((await verify({ asset_b64: item.b64_json })).body).toMatchObject({ manifest_found: false, signature_valid: false, hash_matches: false, verified: false });
  });
});

describe('POST /v1/images/verify and /v1/videos/verify', () => {
  let png: Buffer;
  let prov: { manifest: Record<string, any>; signature: string };
  let original: Buffer;
  beforeAll(async () => {
    up.reset();
    const r = await oa.images.generate({ model: 'test-image', prompt: 'verify me' });
    original = Buffer.from(up.images[0]!, 'base64');
    png = Buffer.from(r.data![0]!.b64_json!, 'base64');
    prov = (r.data![0] as any).provenance;
  });

  it('a good image: manifest found, signature valid, hash matches, signed by this gateway (both paths)', async () => {
    for (const path of ['/v1/images/verify', '/v1/videos/verify']) {
      const v = await verify({ asset_b64: png.toString('base64') }, path);
      expect(v.status).toBe(200);
      expect(v.body).toEqual({
        manifest_found: true, manifest_source: 'embedded', signature_valid: true, hash_matches: true, signer: t.gw.services.signer.address, signer_is_gateway: true,
        gateway_signer: t.gw.services.signer.address, asset_sha256: prov.manifest.asset_sha256, manifest: prov.manifest, verified: true, reasons: [],
      });
    }
  });

  it('bytes added in a second svc-provenance chunk are a change: the hash no longer matches', async () => {
    const iend = png.length - 12;
    const padded = Buffer.concat([png.subarray(0, iend), itxtChunk('svc-provenance', 'anything at all '.repeat(100)), png.subarray(iend)]);
    const v = (await verify({ asset_b64: padded.toString('base64') })).body;
    expect(v).toMatchObject({ manifest_found: true, signature_valid: true, signer_is_gateway: true, hash_matches: false, verified: false });
    // Beside a supplied manifest too: only the one chunk the gateway embedded is left out of the hash.
    expect((await verify({ asset_b64: padded.toString('base64'), manifest: prov.manifest, signature: prov.signature })).body).toMatchObject({ hash_matches: false, verified: false });
  });

  it('tampered pixels: the hash no longer matches, the signature is still valid', async () => {
    for (const fixCrc of [true, false]) {
      const bad = tamper(png, 'IDAT', fixCrc);
      const v = (await verify({ asset_b64: bad.toString('base64') })).body;
      expect(v).toMatchObject({ manifest_found: true, signature_valid: true, signer_is_gateway: true, hash_matches: false, verified: false });
      expect(v.asset_sha256).not.toBe(prov.manifest.asset_sha256);
    }
  });

  it('an altered manifest no longer verifies its signature; a foreign signer is valid but not this gateway', async () => {
    const altered = { ...prov.manifest, model: 'some-other-model' };
    const a = (await verify({ asset_b64: png.toString('base64'), manifest: altered, signature: prov.signature })).body;
    expect(a).toMatchObject({ manifest_found: true, manifest_source: 'supplied', signature_valid: false, hash_matches: true, signer_is_gateway: false, verified: false });
    expect(a.signer).not.toBe(t.gw.services.signer.address);

    // Someone else's key signs a manifest for the same pixels and embeds it: valid signature, foreign signer.
    const other = Wallet.createRandom();
    const foreign = { ...prov.manifest, signer: other.address };
    const text = canonicalizeJson({ manifest: foreign, signature: await other.signMessage(canonicalizeJson(foreign)!) })!;
    const iend = original.length - 12;
    const forged = Buffer.concat([original.subarray(0, iend), itxtChunk('svc-provenance', text), original.subarray(iend)]);
    const f = (await verify({ asset_b64: forged.toString('base64') })).body;
    expect(f).toMatchObject({ manifest_found: true, manifest_source: 'embedded', signature_valid: true, hash_matches: true, signer: other.address, signer_is_gateway: false, verified: false });
    expect(f.reasons).toContain('signer: not this gateway');

    // Re-labelling the signer of our manifest is an alteration too: the signature recovers to neither address.
    const claimed = (await verify({ manifest: { ...prov.manifest, signer: other.address }, signature: prov.signature })).body;
    expect(claimed).toMatchObject({ signature_valid: false, signer_is_gateway: false });
    expect([t.gw.services.signer.address, other.address]).not.toContain(claimed.signer);
    // A foreign signature over a manifest that claims this gateway as signer is no signature of ours.
    const impostor = await other.signMessage(canonicalizeJson(prov.manifest)!);
    expect((await verify({ manifest: prov.manifest, signature: impostor })).body).toMatchObject({ signature_valid: false, signer: other.address, signer_is_gateway: false });
  });

  it('a manifest alone (provenance object or JSON text) checks the signature but not the hash; a bare PNG has no manifest', async () => {
    const alone = (await verify({ manifest: prov })).body;
    expect(alone).toMatchObject({ manifest_found: true, signature_valid: true, hash_matches: false, asset_sha256: null, verified: false });
    expect((await verify({ manifest: JSON.stringify(prov.manifest), signature: prov.signature })).body).toMatchObject({ manifest_found: true, signature_valid: true });
    const bare = (await verify({ asset_b64: original.toString('base64') })).body;
    expect(bare).toMatchObject({ manifest_found: false, manifest_source: null, signature_valid: false, hash_matches: false, signer: null, asset_sha256: prov.manifest.asset_sha256 });
    expect((await verify({ asset_b64: `data:image/png;base64,${png.toString('base64')}` })).body.verified).toBe(true);
  });

  it('bad input: 400 naming the field', async () => {
    expect((await verify({})).body.error).toMatchObject({ type: 'invalid_request', param: 'asset_b64' });
    expect((await verify({ asset_b64: 'not base64!' })).body.error).toMatchObject({ type: 'invalid_request', param: 'asset_b64' });
    const m = await verify({ manifest: 42 });
    expect(m.status).toBe(400);
    expect(m.body.error.param).toBe('manifest');
    expect((await verify({ manifest: '{not json', signature: '0x00' })).body).toMatchObject({ manifest_found: false, signature_valid: false });
  });
});
