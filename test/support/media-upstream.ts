import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { crc32, deflateSync } from 'node:zlib';
import { readBody } from './http.ts';

/**
 * A real HTTP server on loopback speaking OpenAI's images and videos APIs, standing in for a media
 * provider. Images are small real PNGs (RGB, deflated with zlib, correct CRCs) whose colour depends on
 * the prompt and index. Video jobs stay where they are until the test moves them (`advance`); their
 * content is fake mp4 bytes (an ftyp box then deterministic filler). Every request is recorded.
 */
export interface MediaRequest {
  method: string;
  path: string;
  body: Record<string, any>;
  authorization: string | undefined;
}

export interface UpstreamVideoJob {
  id: string;
  object: 'video';
  model: string;
  status: 'queued' | 'in_progress' | 'completed' | 'failed';
  progress: number;
  seconds: string;
  size: string;
  created_at: number;
  error: { code: string; message: string } | null;
  deleted: boolean;
}

export interface MediaSwitches {
  /** Every call answers this status with an OpenAI error body. */
  failWith: number | null;
  /** Images returned per request (default: n). */
  imageCount: number | null;
  /** Return JPEG-looking bytes instead of PNGs. */
  jpeg: boolean;
  /** GET .../content answers this status. */
  contentFailWith: number | null;
  /** Bytes of filler in each video file (default 4096). */
  videoBytes: number | null;
  /** GET .../content sends this many bytes of the file, then drops the connection. */
  contentCutAfter: number | null;
  /** GET .../content sends this many bytes of the file, then waits for `releaseContent()` before the rest. */
  contentHoldAfter: number | null;
}

export interface MediaUpstream {
  url: string;
  requests: MediaRequest[];
  switches: MediaSwitches;
  videos: Map<string, UpstreamVideoJob>;
  /** Every image sent, base64 as sent. */
  images: string[];
  /** The most recently created video job. */
  lastVideo(): UpstreamVideoJob;
  advance(id: string, to: Partial<Pick<UpstreamVideoJob, 'status' | 'progress' | 'seconds' | 'error'>>): void;
  /** The bytes GET .../content serves for a job. */
  content(id: string): Buffer;
  /** Lets the downloads held by `contentHoldAfter` go on. */
  releaseContent(): void;
  reset(): void;
  close(): Promise<void>;
}

const DEFAULTS: MediaSwitches = { failWith: null, imageCount: null, jpeg: false, contentFailWith: null, videoBytes: null, contentCutAfter: null, contentHoldAfter: null };

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type, 'latin1'), data])) >>> 0);
  return Buffer.concat([len, Buffer.from(type, 'latin1'), data, crc]);
}

/** A valid width x height RGB PNG filled with one colour, with a diagonal line so rows differ. */
export function makePng(width: number, height: number, rgb: [number, number, number]): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit, truecolour, deflate, no filter, no interlace
  const raw = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    const row = y * (1 + width * 3);
    raw[row] = 0;
    for (let x = 0; x < width; x++) raw.set(x === y ? [255, 255, 255] : rgb, row + 1 + x * 3);
  }
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

function colour(seed: string): [number, number, number] {
  const h = createHash('sha256').update(seed).digest();
  return [h[0]!, h[1]!, h[2]!];
}

function mp4(id: string, bytes = 4096): Buffer {
  const ftyp = Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypmp42', 'latin1'), Buffer.from([0, 0, 0, 0]), Buffer.from('isommp42', 'latin1')]);
  const filler = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i += 32) createHash('sha256').update(`${id}:${i}`).digest().copy(filler, i);
  return Buffer.concat([ftyp, filler]);
}


export async function startMediaUpstream(): Promise<MediaUpstream> {
  const requests: MediaRequest[] = [];
  const switches: MediaSwitches = { ...DEFAULTS };
  /** Each job's file, made once (a large one takes a while, and is served as the same bytes each time). */
  const files = new Map<string, Buffer>();
  let release = () => {};
  let held = new Promise<void>((r) => (release = r));
  const file = (id: string) => {
    const key = `${id}:${switches.videoBytes}`;
    if (!files.has(key)) files.set(key, mp4(id, switches.videoBytes ?? undefined));
    return files.get(key)!;
  };
  const videos = new Map<string, UpstreamVideoJob>();
  const images: string[] = [];
  let n = 0;
  const server: Server = createServer(async (req, res) => {
    const text = await readBody(req);
    let body: Record<string, any> = {};
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = { _raw: text };
    }
    const path = (req.url ?? '').split('?')[0]!;
    requests.push({ method: req.method ?? '', path, body, authorization: req.headers.authorization });
    const json = (status: number, b: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b));
    };
    const fail = (status: number, message: string) => json(status, { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null } });
    if (switches.failWith !== null) return fail(switches.failWith, switches.failWith >= 500 ? 'upstream exploded' : 'prompt: rejected by the safety system');

    if (req.method === 'POST' && path === '/v1/images/generations') {
      const count = switches.imageCount ?? body.n ?? 1;
      const [w, h] = String(body.size ?? '16x16').split('x').map(Number) as [number, number];
      const data = Array.from({ length: count }, (_, i) => {
        const bytes = switches.jpeg ? Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), createHash('sha256').update(`${body.prompt}:${i}`).digest(), Buffer.from([0xff, 0xd9])]) : makePng(Math.min(w, 16), Math.min(h, 16), colour(`${body.prompt}:${i}`));
        const b64 = bytes.toString('base64');
        images.push(b64);
        return { b64_json: b64, revised_prompt: `${body.prompt} (revised)` };
      });
      return json(200, { created: 1_700_000_000 + ++n, data });
    }

    if (req.method === 'POST' && path === '/v1/videos') {
      const id = `video_${++n}`;
      const job: UpstreamVideoJob = { id, object: 'video', model: body.model, status: 'queued', progress: 0, seconds: String(body.seconds ?? '4'), size: body.size ?? '720x1280', created_at: 1_700_000_000 + n, error: null, deleted: false };
      videos.set(id, job);
      return json(200, view(job));
    }
    const m = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(path);
    const job = m ? videos.get(decodeURIComponent(m[1]!)) : undefined;
    if (m && (!job || job.deleted)) return fail(404, 'no such video');
    if (job && req.method === 'GET' && !m![2]) return json(200, view(job));
    if (job && req.method === 'GET' && m![2]) {
      if (switches.contentFailWith !== null) return fail(switches.contentFailWith, 'content unavailable');
      if (job.status !== 'completed') return fail(400, 'video is not ready');
      const bytes = file(job.id);
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(bytes.length) });
      if (switches.contentCutAfter !== null) return res.write(bytes.subarray(0, switches.contentCutAfter), () => res.destroy());
      if (switches.contentHoldAfter !== null) {
        const at = switches.contentHoldAfter;
        res.write(bytes.subarray(0, at));
        return void held.then(() => res.end(bytes.subarray(at)));
      }
      return res.end(bytes);
    }
    if (job && req.method === 'DELETE' && !m![2]) {
      job.deleted = true;
      return json(200, { id: job.id, object: 'video.deleted', deleted: true });
    }
    return fail(404, `no route ${req.method} ${path}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    switches,
    videos,
    images,
    lastVideo() {
      return [...videos.values()].at(-1)!;
    },
    advance(id, to) {
      const job = videos.get(id);
      if (!job) throw new Error(`no upstream video ${id}`);
      Object.assign(job, to);
    },
    content: (id) => file(id),
    releaseContent() {
      release();
      held = new Promise<void>((r) => (release = r));
    },
    reset() {
      files.clear();
      requests.length = 0;
      images.length = 0;
      Object.assign(switches, DEFAULTS);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function view(j: UpstreamVideoJob) {
  const { deleted: _deleted, ...rest } = j;
  return rest;
}
