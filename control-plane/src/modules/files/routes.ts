import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { invalid } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import { MultipartParser, boundaryOf, type PartSink } from './multipart.ts';
import { FILES_LIST_CAP, checkPurpose, type FilesService } from './service.ts';

export const FileObject = z.object({
  id: z.string().describe('file-...'),
  object: z.literal('file'),
  bytes: z.number(),
  created_at: z.number().describe('Unix seconds.'),
  filename: z.string(),
  purpose: z.enum(['batch', 'batch_output']),
  status: z.literal('processed'),
  status_details: z.string().nullable().describe('null while the content can be read; otherwise why and when it was destroyed.'),
  expires_at: z.number().describe('Unix seconds: the hard TTL of the content.'),
});

const IdParams = z.object({ id: z.string().max(64) });
const cfg = { auth: 'key', scope: 'files' } as const;
/** The upload as OpenAPI shows it (OpenAI's multipart shape); `uploadFields` reads it. */
const UPLOAD_BODY = {
  contentType: 'multipart/form-data',
  schema: {
    type: 'object',
    required: ['purpose', 'file'],
    properties: {
      purpose: { type: 'string', enum: ['batch'] },
      file: { type: 'string', format: 'binary', description: 'The JSONL input, one request per line.' },
    },
  },
};
/** Multipart framing around the file part: headers, the purpose field, boundaries. */
const FRAMING_BYTES = 64 * 1024;

/** Bytes the purpose field may have. */
const MAX_PURPOSE_BYTES = 64;

/**
 * Reads an upload's multipart body as it arrives: the file part goes to the sink `file` gives, the purpose
 * is checked as soon as it ends; an unknown, repeated or missing field is a 400 that names it.
 */
async function readUpload(body: AsyncIterable<Buffer>, boundary: string, file: (filename: string | null) => PartSink): Promise<{ purpose: string }> {
  const got = new Set<string>();
  let purpose = '';
  const parser = new MultipartParser(boundary, (name, filename) => {
    if (name !== 'purpose' && name !== 'file') throw invalid(`${name}: unknown field; an upload has the fields purpose and file`, name);
    if (got.has(name)) throw invalid(`${name}: given more than once`, name);
    got.add(name);
    if (name === 'file') return file(filename);
    const text: Buffer[] = [];
    let bytes = 0;
    return {
      write: (d) => {
        bytes += d.length;
        if (bytes > MAX_PURPOSE_BYTES) throw invalid(`purpose: must be "batch" (got ${bytes}+ bytes)`, 'purpose');
        text.push(d);
      },
      end: () => checkPurpose((purpose = Buffer.concat(text).toString('utf8').trim())),
    };
  });
  for await (const piece of body) await parser.write(piece);
  parser.end();
  if (!got.has('purpose')) throw invalid('purpose: required ("batch")', 'purpose');
  if (!got.has('file')) throw invalid('file: required (the JSONL content, sent as a file part)', 'file');
  return { purpose };
}

/** Files (spec: File; OpenAI's /v1/files shapes). */
export function fileRoutes(app: FastifyInstance, files: FilesService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['files'];

  r.post(
    '/v1/files',
    {
      config: { ...cfg, rawBody: true, streamBody: true, documentedBody: UPLOAD_BODY },
      bodyLimit: files.cfg.fileMaxBytes + FRAMING_BYTES,
      schema: {
        tags,
        summary: 'Upload a batch input file (multipart/form-data: purpose=batch, file=JSONL); sealed at rest with a hard TTL',
        description:
          `Each line is \`{custom_id, method: "POST", url: "/v1/chat/completions" | "/v1/embeddings", body}\` with a unique custom_id; a bad line is a 400 naming it. ` +
          `At most ${files.cfg.fileMaxBytes} bytes (413 above) and ${files.cfg.maxLines} lines. The content is destroyed after ${files.cfg.fileTtlSeconds} s or when the batch it feeds ends.`,
        response: { 200: FileObject },
      },
    },
    async (req) => {
      const p = requireKey(req);
      const boundary = boundaryOf(req.headers['content-type']);
      return files.upload({ accountId: p.accountId, keyId: p.keyId }, (file) => readUpload(req.body as AsyncIterable<Buffer>, boundary, file));
    },
  );

  r.get(
    '/v1/files',
    {
      config: cfg,
      schema: {
        tags,
        summary: `Your files, newest first, metadata only (at most ${FILES_LIST_CAP}; OpenAI list object)`,
        querystring: z.object({ purpose: z.enum(['batch', 'batch_output']).optional(), limit: z.coerce.number().int().min(1).max(FILES_LIST_CAP).optional() }),
        response: { 200: z.object({ object: z.literal('list'), data: z.array(FileObject) }) },
      },
    },
    async (req) => ({ object: 'list' as const, data: await files.list(requireKey(req).accountId, req.query) }),
  );

  r.get('/v1/files/:id', { config: cfg, schema: { tags, summary: "One file's metadata", params: IdParams, response: { 200: FileObject } } }, async (req) =>
    files.get(requireKey(req).accountId, req.params.id),
  );

  r.get(
    '/v1/files/:id/content',
    {
      config: cfg,
      schema: {
        tags,
        summary: 'The raw content; 410 once its hard TTL passed or the batch it fed ended',
        params: IdParams,
        response: { 200: z.any().describe('application/octet-stream: the bytes as uploaded, or the batch output JSONL') },
      },
    },
    async (req, reply) => {
      const f = await files.content(requireKey(req).accountId, req.params.id);
      const name = f.filename.replace(/[^\w.\-]/g, '_');
      return reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${name}"`).header('content-length', f.bytes).send(Readable.from(f.body));
    },
  );

  r.delete(
    '/v1/files/:id',
    {
      config: cfg,
      schema: {
        tags,
        summary: 'Delete a file; its ciphertext is destroyed at once (409 while it feeds a batch that has not ended)',
        params: IdParams,
        response: { 200: z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) }) },
      },
    },
    async (req) => files.delete(requireKey(req).accountId, req.params.id),
  );
}
