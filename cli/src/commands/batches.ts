import { createReadStream, createWriteStream } from 'node:fs';
import { basename, extname } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Option, type Command } from 'commander';
import { ApiError, type SvcClient } from '@svc/shared/client';
import { context, keyClient } from '../context.ts';
import { CliError, EXIT_FAILURE, setExitCode, usageError } from '../errors.ts';
import { fields } from '../output.ts';
import { pollSeconds, pollUntil } from '../poll.ts';
import { progressBar } from '../progress-bar.ts';
import { uploadBatchFile } from '../upload.ts';
import { localSize } from './files.ts';

const ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings'] as const;
type Endpoint = (typeof ENDPOINTS)[number];
const ENDED = ['completed', 'failed', 'expired', 'cancelled'];
const LINE_HINT = 'each line is one JSON request: {"custom_id","method":"POST","url","body"}, or a bare request body such as {"messages":[...]}';

/** A batch as the gateway shows it (OpenAI's shape). */
interface Batch {
  id: string;
  status: string;
  endpoint: string;
  input_file_id: string;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: { total: number; completed: number; failed: number };
  errors: { data: Array<{ code: string; message: string; line: number | null }> } | null;
}

interface Prepared {
  lines: number;
  endpoint: Endpoint;
}

/**
 * One line of the input as the batch line it becomes: a full batch line is kept (its model set to `model` when
 * given), a bare request body is wrapped (custom_id `line-N`, the endpoint's url). A line that is not a JSON
 * object, or has no model and none is given, is a usage error naming the file and line.
 */
function batchLine(file: string, n: number, text: string, model: string | undefined, endpoint: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw usageError(`${file} is not JSONL: line ${n} is not JSON (${(e as Error).message})`, LINE_HINT);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw usageError(`${file} is not JSONL of requests: line ${n} is not a JSON object`, LINE_HINT);
  const o = v as Record<string, unknown>;
  const full = 'body' in o && 'custom_id' in o;
  const raw = full ? o.body : o;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw usageError(`${file} line ${n}: body is not a JSON object`, LINE_HINT);
  const body = { ...(raw as Record<string, unknown>) };
  if (model !== undefined) body.model = model;
  if (typeof body.model !== 'string' || body.model === '') throw usageError(`${file} line ${n} names no model`, 'pass --model M, or give each line\'s body a "model"');
  return full ? { ...o, method: o.method ?? 'POST', url: o.url ?? endpoint, body } : { custom_id: `line-${n}`, method: 'POST', url: endpoint, body };
}

/** The input's non-blank lines with their numbers, read as they come. */
async function* inputLines(path: string, read: { bytes: number }): AsyncGenerator<{ n: number; text: string }> {
  const stream = createReadStream(path);
  stream.on('data', (c) => (read.bytes += (c as Buffer).length));
  let n = 0;
  for await (const text of createInterface({ input: stream, crlfDelay: Infinity })) {
    n++;
    if (text.trim() !== '') yield { n, text };
  }
}

/** Reads the input once to check every line (nothing is sent when one is wrong), and picks the endpoint. */
async function prepare(file: string, model: string | undefined, endpoint: Endpoint | undefined): Promise<Prepared> {
  let lines = 0;
  let chosen = endpoint;
  const ids = new Set<string>();
  for await (const { n, text } of inputLines(file, { bytes: 0 })) {
    const line = batchLine(file, n, text, model, chosen ?? '/v1/chat/completions');
    if (chosen === undefined) chosen = ((ENDPOINTS as readonly string[]).includes(String(line.url)) ? line.url : '/v1/chat/completions') as Endpoint;
    const id = String(line.custom_id);
    if (ids.has(id)) throw usageError(`${file} line ${n}: custom_id ${JSON.stringify(id)} is used by an earlier line`, 'give each line its own custom_id');
    ids.add(id);
    lines++;
  }
  if (lines === 0) throw usageError(`${file} has no requests`, LINE_HINT);
  return { lines, endpoint: chosen ?? '/v1/chat/completions' };
}

async function* encoded(file: string, model: string | undefined, endpoint: string, read: { bytes: number }): AsyncGenerator<Buffer> {
  let pending: string[] = [];
  let size = 0;
  for await (const { n, text } of inputLines(file, read)) {
    const s = `${JSON.stringify(batchLine(file, n, text, model, endpoint))}\n`;
    pending.push(s);
    size += s.length;
    if (size >= 256 * 1024) {
      yield Buffer.from(pending.join(''));
      pending = [];
      size = 0;
    }
  }
  if (pending.length > 0) yield Buffer.from(pending.join(''));
}

async function download(client: SvcClient, fileId: string, path: string): Promise<void> {
  const res = await client.raw('GET', `/v1/files/${encodeURIComponent(fileId)}/content`);
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => undefined), res.headers);
  await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), createWriteStream(path));
}

function batchText(b: Batch): string {
  const c = b.request_counts;
  return fields([
    ['id', b.id],
    ['status', b.status],
    ['lines', `${c.completed} completed, ${c.failed} failed, of ${c.total}`],
    ['output file', b.output_file_id ?? '-'],
    ['error file', b.error_file_id ?? '-'],
  ]);
}

const stem = (file: string) => basename(file, extname(file));

export function registerBatches(program: Command): void {
  const batches = program.command('batches').description('Batches: many requests run by the gateway, each metered and receipted (needs an API key with the files and inference scopes)');

  batches
    .command('create <file>')
    .description('Upload FILE (JSONL: batch lines, or bare request bodies) and start a batch; prints its id, or with --wait waits and writes the output file')
    .option('--model <model>', "the model of every line (sets each body's model)")
    .addOption(new Option('--endpoint <path>', 'the route the lines call (default: the lines\' url, else /v1/chat/completions)').choices(ENDPOINTS))
    .option('--wait', 'wait for the batch to end (a progress bar of lines on a terminal), then write the output file')
    .option('-o, --output <path>', 'where --wait writes the output (default: FILE\'s name + .output.jsonl; failed lines go to .errors.jsonl)')
    .option('--poll <seconds>', 'how often --wait asks (default 2)', pollSeconds)
    .addHelpText('after', '\nExit codes (--wait): 0 every line answered; 1 the batch failed, expired, or some lines failed (the error file has them).')
    .action(async (file: string, opts: { model?: string; endpoint?: Endpoint; wait?: boolean; output?: string; poll?: number }, cmd: Command) => {
      const ctx = context(cmd);
      const size = localSize(file);
      const { lines, endpoint } = await prepare(file, opts.model, opts.endpoint);
      const client = keyClient(ctx);
      const read = { bytes: 0 };
      const f = await uploadBatchFile(client, `${stem(file)}.jsonl`, encoded(file, opts.model, endpoint, read), { sourceBytes: size, read: () => read.bytes, label: `uploading ${basename(file)}` });
      const created = await client.request<Batch>('POST', '/v1/batches', { body: { input_file_id: f.id, endpoint, completion_window: '24h' } });
      if (!opts.wait) {
        ctx.out.result(created, () => created.id);
        if (!ctx.out.json) ctx.out.note(`batch ${created.id} of ${lines} lines started; \`svc batches status ${created.id}\` to follow it`);
        return;
      }
      ctx.out.note(`batch ${created.id} of ${lines} lines started`);
      const bar = progressBar('lines', lines, { format: (d, t) => `${d}/${t}` });
      let b: Batch;
      try {
        b = await pollUntil(
          () => client.request<Batch>('GET', `/v1/batches/${encodeURIComponent(created.id)}`),
          (x) => ENDED.includes(x.status),
          (opts.poll ?? 2) * 1000,
          (x) => bar.update(x.request_counts.completed + x.request_counts.failed, x.request_counts.total || lines, x.status),
        );
      } finally {
        bar.stop();
      }
      const output = opts.output ?? `${stem(file)}.output.jsonl`;
      const errorsPath = output.endsWith('.output.jsonl') ? output.replace(/\.output\.jsonl$/, '.errors.jsonl') : `${output}.errors.jsonl`;
      if (b.output_file_id) await download(client, b.output_file_id, output);
      if (b.error_file_id) await download(client, b.error_file_id, errorsPath);
      const c = b.request_counts;
      const written = { output_path: b.output_file_id ? output : null, error_path: b.error_file_id ? errorsPath : null };
      ctx.out.result({ ...b, ...written }, () => written.output_path ?? '');
      ctx.out.note(`batch ${b.id} ${b.status}: ${c.completed} completed, ${c.failed} failed, of ${c.total}${written.output_path ? `; output in ${output}` : ''}${written.error_path ? `; failed lines in ${errorsPath}` : ''}`);
      if (b.status !== 'completed') {
        const why = b.errors?.data[0];
        throw new CliError(`batch ${b.id} ${b.status}${why ? `: ${why.code}: ${why.message}${why.line !== null ? ` (line ${why.line})` : ''}` : ''}`, EXIT_FAILURE, written.error_path ? `see ${errorsPath}` : 'check the input and retry');
      }
      if (c.failed > 0) setExitCode(EXIT_FAILURE);
    });

  batches
    .command('status <batch>')
    .description("A batch's status and line counts")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const b = await keyClient(ctx).request<Batch>('GET', `/v1/batches/${encodeURIComponent(id)}`);
      ctx.out.result(b, () => batchText(b));
    });
}
