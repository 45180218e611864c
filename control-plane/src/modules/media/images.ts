import { ServiceError, sha256Hex, type Clock, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { imagePrice, type MediaCatalog } from './catalog.ts';
import { assetBytes, embed, signManifest, type Provenance } from './manifest.ts';
import { pngChunks, sniffImage } from './png.ts';
import { mapped, type MediaClient } from './upstream.ts';

export interface ImageRequest {
  model: string;
  prompt: string;
  n?: number | undefined;
  size?: string | undefined;
  response_format?: 'b64_json' | 'url' | undefined;
  quality?: string | undefined;
  style?: string | undefined;
  background?: string | undefined;
  user?: string | undefined;
}

export interface CallContext {
  requestId: string;
  runId: string | null;
  route: string;
  resource: string;
  signal: AbortSignal;
}

interface Delivered {
  bytes: Buffer;
  mediaType: string;
  /** Embeddable: a well-formed PNG. */
  png: boolean;
  revisedPrompt: string | undefined;
}

const B64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The upstream's images that decode; at most `n`. */
function delivered(answer: Record<string, unknown>, n: number): Delivered[] {
  const out: Delivered[] = [];
  for (const item of Array.isArray(answer.data) ? answer.data : []) {
    const b64 = typeof item?.b64_json === 'string' ? item.b64_json.replace(/\s+/g, '') : '';
    if (!b64 || b64.length % 4 !== 0 || !B64.test(b64)) continue;
    const bytes = Buffer.from(b64, 'base64');
    const mediaType = sniffImage(bytes);
    out.push({ bytes, mediaType, png: mediaType === 'image/png' && pngChunks(bytes) !== null, revisedPrompt: typeof item.revised_prompt === 'string' ? item.revised_prompt : undefined });
    if (out.length === n) break;
  }
  return out;
}

/**
 * POST /v1/images/generations: hold n images at the per-image price of the size, call the provider's
 * OpenAI images API, settle for the images actually returned (a signed receipt naming each image's
 * sha256), then sign a provenance manifest per image and embed it in each PNG.
 */
export class ImageService {
  constructor(
    private readonly catalog: MediaCatalog,
    private readonly client: MediaClient,
    private readonly metering: Metering,
    private readonly signer: ReceiptSigner,
    private readonly clock: Clock,
  ) {}

  async generate(p: KeyPrincipal, body: ImageRequest, ctx: CallContext): Promise<{ body: Record<string, unknown>; receipt: SignedReceipt }> {
    if (body.response_format === 'url') {
      throw new ServiceError('invalid_request', 'response_format: this gateway stores no images, so it cannot serve a URL; ask for b64_json (the default)', { param: 'response_format' });
    }
    const { provider, model } = this.catalog.image(body.model);
    const n = body.n ?? 1;
    if (n > model.maxN) throw new ServiceError('invalid_request', `n: the model ${model.id} makes at most ${model.maxN} images per request`, { param: 'n' });
    const size = body.size ?? model.sizes[0]!;
    if (!model.sizes.includes(size)) throw new ServiceError('invalid_request', `size: the model ${model.id} makes ${model.sizes.join(', ')}`, { param: 'size' });
    const price = imagePrice(model, size);
    const hold = await this.metering.hold({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: n * price, route: ctx.route, resource: ctx.resource });

    let images: Delivered[];
    let created: number;
    try {
      const upstreamBody: Record<string, unknown> = { model: model.id, prompt: body.prompt, n, size };
      if (model.sendResponseFormat) upstreamBody.response_format = 'b64_json';
      for (const k of ['quality', 'style', 'background', 'user'] as const) if (body[k] !== undefined) upstreamBody[k] = body[k];
      const answer = await this.client.json(provider, 'POST', '/images/generations', upstreamBody, ctx.signal).catch((e: unknown) => {
        throw mapped(e);
      });
      images = delivered(answer, n);
      if (images.length === 0) throw new ServiceError('upstream_error', `Provider ${provider.name} returned no base64 image`);
      created = typeof answer.created === 'number' ? answer.created : Math.floor(this.clock.now().getTime() / 1000);
    } catch (e) {
      await this.metering.release(hold).catch(() => undefined);
      throw e;
    }

    const digests = images.map((i) => sha256Hex(assetBytes(i.bytes)));
    const { receipt } = await this.metering.settle(hold, {
      costMicroUsd: images.length * price,
      kind: 'image',
      model: model.id,
      units: { images: images.length },
      detail: { backend: `provider:${provider.name}`, size, requested: n, price_micro_usd_per_image: price, asset_sha256: digests },
    });
    const now = this.clock.now();
    const data = images.map((img, index) => {
      const prov: Provenance = signManifest(this.signer, { mediaType: img.mediaType, assetSha256: digests[index]!, model: model.id, createdAt: now, receipt, index });
      const bytes = img.png ? embed(img.bytes, prov) : img.bytes;
      return {
        b64_json: bytes.toString('base64'),
        ...(img.revisedPrompt !== undefined ? { revised_prompt: img.revisedPrompt } : {}),
        provenance: { ...prov, embedded: img.png },
      };
    });
    return { body: { created, data, size }, receipt };
  }
}
