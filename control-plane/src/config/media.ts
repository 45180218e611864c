import { z } from 'zod';
import { uniqueProviders } from './inference.ts';
import { intWithDefault, jsonEnv } from './parse.ts';

/**
 * Media providers and the keyless assistant.
 *
 * SVC_IMAGE_PROVIDERS: OpenAI-compatible image providers (`POST {base_url}/images/generations`), e.g.
 * `[{"name":"openai","base_url":"https://api.openai.com/v1","api_key":"sk-...","models":[{"id":"gpt-image-1",
 * "price_micro_usd_per_image":40000,"size_prices":{"1536x1024":60000},"sizes":["1024x1024","1536x1024"],
 * "max_n":4,"send_response_format":false}]}]`. The first size is the default; `size_prices` overrides the
 * per-image price for a size; `send_response_format` (default true) sends `response_format: "b64_json"`
 * upstream (models that always answer base64, such as gpt-image-1, refuse the parameter).
 *
 * SVC_VIDEO_PROVIDERS: OpenAI Videos API providers (`POST {base_url}/videos`, ...), e.g.
 * `[{"name":"openai","base_url":"https://api.openai.com/v1","api_key":"sk-...","models":[{"id":"sora-2",
 * "price_micro_usd_per_second":100000,"max_seconds":12,"seconds":[4,8,12],"resolutions":["720x1280","1280x720"]}]}]`.
 * `seconds` lists the durations accepted (any whole number of seconds up to `max_seconds` without it);
 * the default duration is `default_seconds`, else the first of `seconds`, else `max_seconds`. The first
 * resolution is the default; aspect ratios are derived from the resolutions.
 */
export interface ImageModel {
  id: string;
  pricePerImageMicroUsd: number;
  sizePrices: Record<string, number>;
  sizes: string[];
  maxN: number;
  sendResponseFormat: boolean;
}
export interface VideoModel {
  id: string;
  pricePerSecondMicroUsd: number;
  maxSeconds: number;
  /** Accepted durations; null: any whole number of seconds from 1 to maxSeconds. */
  seconds: number[] | null;
  defaultSeconds: number;
  resolutions: string[];
}
export interface MediaProvider<M> {
  name: string;
  /** Without a trailing slash. */
  baseUrl: string;
  apiKey: string | undefined;
  models: M[];
}
export interface MediaConfig {
  imageProviders: MediaProvider<ImageModel>[];
  videoProviders: MediaProvider<VideoModel>[];
  /** Upstream time limit of one media HTTP call. */
  timeoutMs: number;
  /** Largest image answer or video file taken from an upstream. */
  maxAssetBytes: number;
  /** Body limit of POST /v1/images/verify (an asset travels base64 in JSON). */
  verifyBodyBytes: number;
  video: { ttlSeconds: number; renderTimeoutSeconds: number; pollSeconds: number };
  assistant: { model: string | undefined; maxTokens: number; systemPrompt: string | undefined; rateLimit: number; rateWindowSeconds: number };
}

const SIZE = /^[1-9]\d{1,4}x[1-9]\d{1,4}$/;
const size = z.string().regex(SIZE, 'must be WIDTHxHEIGHT, e.g. 1024x1024');
const micro = z.number().int().min(0).max(1e12);
const providerName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'must be a lowercase name (letters, digits, . _ -; at most 64)');
const baseUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL (OpenAI-compatible, ending in /v1)' });

const ImageEntry = z
  .object({
    id: z.string().min(1).max(200),
    price_micro_usd_per_image: micro,
    size_prices: z.record(size, micro).optional(),
    sizes: z.array(size).min(1).max(32),
    max_n: z.number().int().min(1).max(10).default(10),
    send_response_format: z.boolean().default(true),
  })
  .strict();
const VideoEntry = z
  .object({
    id: z.string().min(1).max(200),
    price_micro_usd_per_second: micro,
    max_seconds: z.number().int().min(1).max(600),
    seconds: z.array(z.number().int().min(1).max(600)).min(1).max(32).optional(),
    default_seconds: z.number().int().min(1).max(600).optional(),
    resolutions: z.array(size).min(1).max(32),
  })
  .strict()
  .superRefine((m, ctx) => {
    for (const [i, s] of (m.seconds ?? []).entries()) if (s > m.max_seconds) ctx.addIssue({ code: 'custom', path: ['seconds', i], message: `exceeds max_seconds ${m.max_seconds}` });
    if (m.default_seconds !== undefined && (m.default_seconds > m.max_seconds || (m.seconds && !m.seconds.includes(m.default_seconds)))) {
      ctx.addIssue({ code: 'custom', path: ['default_seconds'], message: 'must be one of the accepted durations' });
    }
  });

function providers<M extends z.ZodType<{ id: string }>>(model: M) {
  return z
    .array(z.object({ name: providerName, base_url: baseUrl, api_key: z.string().min(1).optional(), models: z.array(model).min(1).max(200) }).strict())
    .max(32)
    .superRefine(uniqueProviders);
}
const ImageProviders = providers(ImageEntry);
const VideoProviders = providers(VideoEntry);
type RawProvider = { name: string; base_url: string; api_key?: string | undefined };
const provider = <M>(p: RawProvider, models: M[]): MediaProvider<M> => ({ name: p.name, baseUrl: p.base_url.replace(/\/+$/, ''), apiKey: p.api_key, models });

export const mediaEnv = {
  SVC_IMAGE_PROVIDERS: jsonEnv(ImageProviders, [] as MediaProvider<ImageModel>[], 'a JSON array of image providers', (list) =>
    list.map((p) =>
      provider(
        p,
        p.models.map((m) => ({ id: m.id, pricePerImageMicroUsd: m.price_micro_usd_per_image, sizePrices: m.size_prices ?? {}, sizes: m.sizes, maxN: m.max_n, sendResponseFormat: m.send_response_format })),
      ),
    ),
  ),
  SVC_VIDEO_PROVIDERS: jsonEnv(VideoProviders, [] as MediaProvider<VideoModel>[], 'a JSON array of video providers', (list) =>
    list.map((p) =>
      provider(
        p,
        p.models.map((m) => ({
          id: m.id,
          pricePerSecondMicroUsd: m.price_micro_usd_per_second,
          maxSeconds: m.max_seconds,
          seconds: m.seconds ?? null,
          defaultSeconds: m.default_seconds ?? m.seconds?.[0] ?? m.max_seconds,
          resolutions: m.resolutions,
        })),
      ),
    ),
  ),
  SVC_MEDIA_TIMEOUT_SECONDS: intWithDefault(300, 1, 3600),
  SVC_MEDIA_MAX_ASSET_BYTES: intWithDefault(256 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
  SVC_MEDIA_VERIFY_BODY_BYTES: intWithDefault(64 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
  SVC_VIDEO_TTL_SECONDS: intWithDefault(24 * 3600, 60, 365 * 24 * 3600),
  SVC_VIDEO_RENDER_TIMEOUT_SECONDS: intWithDefault(3600, 60, 7 * 24 * 3600),
  SVC_VIDEO_POLL_SECONDS: intWithDefault(5, 1, 3600),
  SVC_ASSISTANT_MODEL: z.string().min(1).max(200).optional(),
  SVC_ASSISTANT_MAX_TOKENS: intWithDefault(512, 1, 100_000),
  SVC_ASSISTANT_SYSTEM_PROMPT: z.string().min(1).max(20_000).optional(),
  SVC_ASSISTANT_RATE_LIMIT: intWithDefault(10, 1, 1_000_000),
  SVC_ASSISTANT_RATE_WINDOW_SECONDS: intWithDefault(60, 1, 86_400),
};

type MediaEnv = z.output<z.ZodObject<typeof mediaEnv>>;

export function mediaConfig(e: MediaEnv): MediaConfig {
  return {
    imageProviders: e.SVC_IMAGE_PROVIDERS,
    videoProviders: e.SVC_VIDEO_PROVIDERS,
    timeoutMs: e.SVC_MEDIA_TIMEOUT_SECONDS * 1000,
    maxAssetBytes: e.SVC_MEDIA_MAX_ASSET_BYTES,
    verifyBodyBytes: e.SVC_MEDIA_VERIFY_BODY_BYTES,
    video: { ttlSeconds: e.SVC_VIDEO_TTL_SECONDS, renderTimeoutSeconds: e.SVC_VIDEO_RENDER_TIMEOUT_SECONDS, pollSeconds: e.SVC_VIDEO_POLL_SECONDS },
    assistant: {
      model: e.SVC_ASSISTANT_MODEL,
      maxTokens: e.SVC_ASSISTANT_MAX_TOKENS,
      systemPrompt: e.SVC_ASSISTANT_SYSTEM_PROMPT,
      rateLimit: e.SVC_ASSISTANT_RATE_LIMIT,
      rateWindowSeconds: e.SVC_ASSISTANT_RATE_WINDOW_SECONDS,
    },
  };
}
