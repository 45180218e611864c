import { createWriteStream, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { ApiError } from '@svc/shared/client';
import { context, keyClient } from '../context.ts';
import { CliError, EXIT_FAILURE, usageError, fileProblem } from '../errors.ts';
import { fields, usd } from '../output.ts';
import { pollSeconds, pollUntil } from '../poll.ts';
import { progressBar } from '../progress-bar.ts';

/** A video job as the gateway shows it (GET /v1/videos/generations/{id}). */
interface VideoJob {
  id: string;
  model: string;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled' | 'expired';
  progress: number;
  seconds: number;
  size: string;
  asset_available: boolean;
  content_bytes: number | null;
  cost_micro_usd: number | null;
  reserved_micro_usd: number;
  error: { type: string; message: string } | null;
  receipt: { id: string } | null;
}

const ENDED = ['succeeded', 'failed', 'canceled', 'expired'];
const IMAGE_TYPES: Record<string, string> = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp' };

function wholeSeconds(value: string): number {
  const n = Number(value);
  if (!/^\d{1,4}$/.test(value.trim()) || n < 1) throw new InvalidArgumentError('expected whole seconds');
  return n;
}

function imageDataUrl(path: string): string {
  const type = IMAGE_TYPES[extname(path).toLowerCase()];
  if (!type) throw usageError(`--image ${path}: a .png, .jpg or .webp file`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw usageError(`cannot read ${path}: ${fileProblem(err)}`);
  }
  return `data:${type};base64,${bytes.toString('base64')}`;
}

function jobText(j: VideoJob): string {
  return fields([
    ['id', j.id],
    ['model', j.model],
    ['status', j.status],
    ['progress', `${j.progress}%`],
    ['duration', `${j.seconds} s, ${j.size}`],
    ['cost', j.cost_micro_usd === null ? `${usd(j.reserved_micro_usd)} held` : usd(j.cost_micro_usd)],
    ...(j.error ? ([['error', `${j.error.type}: ${j.error.message}`]] as const) : []),
  ]);
}

export function registerVideos(program: Command): void {
  const videos = program.command('videos').description('Video generation: asynchronous renders, each metered and receipted (needs an API key with the inference scope)');

  videos
    .command('create <prompt>')
    .description('Start a render; prints its id, or with --wait follows its progress and writes the video')
    .requiredOption('--model <model>', 'a video model (GET /v1/videos/models)')
    .option('--seconds <n>', 'duration (default: the model\'s)', wholeSeconds)
    .option('--size <WxH>', 'resolution, e.g. 1280x720')
    .option('--aspect-ratio <W:H>', 'aspect ratio instead of a size, e.g. 16:9')
    .option('--image <file>', 'image-to-video: the first frame (.png, .jpg, .webp)')
    .option('--wait', 'follow the render (a progress bar on a terminal) and write the video when it succeeds')
    .option('-o, --output <path>', 'where --wait writes the video (default: <id>.mp4)')
    .option('--poll <seconds>', 'how often --wait asks (default 2)', pollSeconds)
    .addHelpText('after', '\nExit codes (--wait): 0 the video was written; 1 the render failed, was cancelled or expired.')
    .action(async (prompt: string, opts: { model: string; seconds?: number; size?: string; aspectRatio?: string; image?: string; wait?: boolean; output?: string; poll?: number }, cmd: Command) => {
      const ctx = context(cmd);
      if (opts.size && opts.aspectRatio) throw usageError('give --size or --aspect-ratio, not both');
      const body: Record<string, unknown> = { model: opts.model, prompt };
      if (opts.seconds !== undefined) body.seconds = opts.seconds;
      if (opts.size) body.size = opts.size;
      if (opts.aspectRatio) body.aspect_ratio = opts.aspectRatio;
      if (opts.image) body.image = imageDataUrl(opts.image);
      const client = keyClient(ctx);
      const job = await client.request<VideoJob>('POST', '/v1/videos/generations', { body });
      if (!opts.wait) {
        ctx.out.result(job, () => job.id);
        if (!ctx.out.json) ctx.out.note(`render ${job.id} ${job.status}; \`svc videos status ${job.id}\` to follow it`);
        return;
      }
      const bar = progressBar(`render ${job.id}`, 100, { format: () => '' });
      let done: VideoJob;
      try {
        done = await pollUntil(
          () => client.request<VideoJob>('GET', `/v1/videos/generations/${encodeURIComponent(job.id)}`),
          (j) => ENDED.includes(j.status),
          (opts.poll ?? 2) * 1000,
          (j) => bar.update(j.progress, 100, j.status),
        );
      } finally {
        bar.stop();
      }
      if (done.status !== 'succeeded' || !done.asset_available) {
        throw new CliError(`render ${done.id} ${done.status}${done.error ? `: ${done.error.type}: ${done.error.message}` : ''}`, EXIT_FAILURE, done.status === 'failed' ? 'nothing was charged; try again, or another model' : `see \`svc videos status ${done.id}\``);
      }
      const output = opts.output ?? `${done.id}.mp4`;
      const res = await client.raw('GET', `/v1/videos/generations/${encodeURIComponent(done.id)}/content`);
      if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => undefined), res.headers);
      await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), createWriteStream(output));
      ctx.out.result({ ...done, output_path: output }, () => output);
      ctx.out.note(`render ${done.id} succeeded: ${output} (${done.content_bytes ?? '?'} bytes)  receipt ${done.receipt?.id ?? '-'}  cost ${usd(done.cost_micro_usd)}`);
    });

  videos
    .command('status <id>')
    .description("A render's status, progress and cost")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const j = await keyClient(ctx).request<VideoJob>('GET', `/v1/videos/generations/${encodeURIComponent(id)}`);
      ctx.out.result(j, () => jobText(j));
    });
}
