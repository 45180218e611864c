import { ServiceError, type Clock } from '@svc/shared';
import type { ImageModel, MediaConfig, MediaProvider, VideoModel } from '../../config/media.ts';

export interface Served<M> {
  provider: MediaProvider<M>;
  model: M;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** `1280x720` -> `16:9`. */
export function aspectRatio(size: string): string {
  const [w, h] = size.split('x').map(Number) as [number, number];
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}

/** The price of one image of a size. */
export const imagePrice = (m: ImageModel, size: string) => m.sizePrices[size] ?? m.pricePerImageMicroUsd;

/** The configured image and video models: listed with their prices, resolved per request (404 when unknown). */
export class MediaCatalog {
  private readonly images = new Map<string, Served<ImageModel>>();
  private readonly videos = new Map<string, Served<VideoModel>>();
  private readonly created: number;

  constructor(cfg: MediaConfig, clock: Clock) {
    for (const provider of cfg.imageProviders) for (const model of provider.models) this.images.set(model.id, { provider, model });
    for (const provider of cfg.videoProviders) for (const model of provider.models) this.videos.set(model.id, { provider, model });
    this.created = Math.floor(clock.now().getTime() / 1000);
  }

  imageList() {
    return [...this.images.values()].map(({ provider, model: m }) => ({
      id: m.id,
      object: 'model' as const,
      created: this.created,
      owned_by: provider.name,
      pricing: { per_image_micro_usd: m.pricePerImageMicroUsd, per_size_micro_usd: Object.fromEntries(m.sizes.map((s) => [s, imagePrice(m, s)])) },
      sizes: m.sizes,
      default_size: m.sizes[0]!,
      max_n: m.maxN,
    }));
  }

  videoList() {
    return [...this.videos.values()].map(({ provider, model: m }) => ({
      id: m.id,
      object: 'model' as const,
      created: this.created,
      owned_by: provider.name,
      pricing: { per_second_micro_usd: m.pricePerSecondMicroUsd },
      max_seconds: m.maxSeconds,
      seconds: m.seconds,
      default_seconds: m.defaultSeconds,
      resolutions: m.resolutions,
      default_resolution: m.resolutions[0]!,
      aspect_ratios: [...new Set(m.resolutions.map(aspectRatio))],
    }));
  }

  image(id: string): Served<ImageModel> {
    const s = this.images.get(id);
    if (!s) throw new ServiceError('not_found', `The image model "${id}" does not exist; GET /v1/images/models lists the models served`, { param: 'model', code: 'model_not_found' });
    return s;
  }

  video(id: string): Served<VideoModel> {
    const s = this.videos.get(id);
    if (!s) throw new ServiceError('not_found', `The video model "${id}" does not exist; GET /v1/videos/models lists the models served`, { param: 'model', code: 'model_not_found' });
    return s;
  }
}
