import type { FastifyInstance } from 'fastify';
import { assistantRoutes } from './assistant.ts';
import type { Media } from './deps.ts';
import { imageRoutes } from './routes-images.ts';
import { videoRoutes } from './routes-videos.ts';

/** The media module's routes: image and video catalogs, image generation, verify, video jobs, the keyless assistant. */
export function mediaRoutes(app: FastifyInstance, m: Media): void {
  imageRoutes(app, m);
  videoRoutes(app, m);
  assistantRoutes(app, { inference: m.inference, config: m.config.assistant, clock: m.clock });
}
