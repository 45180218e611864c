import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ServiceError } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { RunHeader } from '../inference/schemas.ts';
import { callerSignal } from '../inference/stream.ts';
import type { Media } from './deps.ts';
import { verifyProvenance } from './manifest.ts';
import { ImageBody, ImageModelList, ImagesResponse, VerifyBody, VerifyResult, VideoModelList } from './schemas.ts';

const tags = ['media'];

/** base64 or base64url, optionally as a data: URL; whitespace ignored. */
function decodeAsset(s: string): Buffer {
  const body = s.replace(/^data:[^,]*;base64,/, '').replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(body) || body.replace(/=+$/, '').length % 4 === 1) {
    throw new ServiceError('invalid_request', 'asset_b64: not base64', { param: 'asset_b64' });
  }
  return Buffer.from(body, body.includes('-') || body.includes('_') ? 'base64url' : 'base64');
}

/** Model catalogs, image generation and provenance verification. */
export function imageRoutes(app: FastifyInstance, m: Media): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/v1/images/models',
    { config: { auth: 'public' }, schema: { tags, summary: 'Image model catalog with per-image prices (micro-USD, per size); empty until an image provider is configured', response: { 200: ImageModelList } } },
    async () => ({ object: 'list' as const, data: m.catalog.imageList() }),
  );
  r.get(
    '/v1/videos/models',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'Video model catalog with per-second prices (micro-USD), durations, resolutions and aspect ratios; empty until a video provider is configured', response: { 200: VideoModelList } },
    },
    async () => ({ object: 'list' as const, data: m.catalog.videoList() }),
  );

  r.post(
    '/v1/images/generations',
    {
      config: { auth: 'key', scope: 'inference', billable: true },
      schema: {
        tags,
        summary: 'OpenAI-shape image generation (b64_json): n images held at the per-image price, charged per image returned; each carries a signed provenance manifest (embedded in PNGs)',
        headers: RunHeader,
        body: ImageBody,
        response: { 200: ImagesResponse },
      },
    },
    async (req, reply) => {
      const path = '/v1/images/generations';
      const out = await m.images.generate(requireKey(req), req.body, {
        requestId: req.id,
        runId: runIdOf(req),
        route: `POST ${path}`,
        resource: new URL(path, m.publicUrl).toString(),
        signal: callerSignal(reply),
      });
      setReceiptHeaders(reply, out.receipt);
      // A string skips the response serializer: megabytes of base64 need no second pass.
      return reply.code(200).type('application/json; charset=utf-8').send(JSON.stringify(out.body) as never);
    },
  );

  for (const path of ['/v1/images/verify', '/v1/videos/verify']) {
    r.post(
      path,
      {
        config: { auth: 'public', tooLargeHint: 'send the asset\'s sha256 as asset_sha256 instead of asset_b64' },
        bodyLimit: m.config.verifyBodyBytes,
        schema: {
          tags,
          summary: `${path.includes('videos') ? 'Alias of /v1/images/verify. ' : ''}Check a provenance manifest: manifest_found, signature_valid and hash_matches are reported independently`,
          body: VerifyBody,
          response: { 200: VerifyResult },
        },
      },
      async (req) => {
        const b = req.body;
        if (b.asset_b64 === undefined && b.asset_sha256 === undefined && b.manifest === undefined) {
          throw new ServiceError('invalid_request', 'asset_b64: give the asset (or its asset_sha256), a manifest, or both', { param: 'asset_b64' });
        }
        if (b.asset_b64 !== undefined && b.asset_sha256 !== undefined) {
          throw new ServiceError('invalid_request', 'asset_sha256: give the asset or its sha256, not both', { param: 'asset_sha256' });
        }
        const asset = b.asset_b64 === undefined ? undefined : decodeAsset(b.asset_b64);
        return verifyProvenance({ asset, assetSha256: b.asset_sha256, manifest: b.manifest, signature: b.signature }, m.signer.address);
      },
    );
  }
}
