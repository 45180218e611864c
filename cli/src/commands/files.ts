import { createReadStream, statSync } from 'node:fs';
import { basename } from 'node:path';
import { Option, type Command } from 'commander';
import { context, keyClient } from '../context.ts';
import { usageError, fileProblem } from '../errors.ts';
import { fields } from '../output.ts';
import { uploadBatchFile, type FileObject } from '../upload.ts';

/** A local file's size, or a usage error naming it. */
export function localSize(path: string): number {
  let st;
  try {
    st = statSync(path);
  } catch (err) {
    throw usageError(`cannot read ${path}: ${fileProblem(err)}`);
  }
  if (!st.isFile()) throw usageError(`${path} is not a file`);
  return st.size;
}

/** The file's bytes as they are read, counting them in `read.bytes`. */
export async function* readCounting(path: string, read: { bytes: number }): AsyncGenerator<Buffer> {
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) {
    read.bytes += (chunk as Buffer).length;
    yield chunk as Buffer;
  }
}

export function fileText(f: FileObject): string {
  return fields([
    ['id', f.id],
    ['name', f.filename],
    ['bytes', String(f.bytes)],
    ['purpose', f.purpose],
    ['expires', new Date(f.expires_at * 1000).toISOString()],
  ]);
}

export function registerFiles(program: Command): void {
  const files = program.command('files').description('Files for batches (needs an API key with the files scope: SVC_KEY or --api-key-file)');
  files
    .command('upload <file>')
    .description('Upload a batch input file (JSONL, one request a line); prints its id. A progress bar shows for large files on a terminal')
    .addOption(new Option('--purpose <purpose>', 'what the file is for').choices(['batch']).default('batch'))
    .addHelpText('after', '\nEach line: {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}.\n`svc batches create FILE --model M` builds these lines from bare request bodies, uploads and runs them.')
    .action(async (file: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const size = localSize(file);
      if (size === 0) throw usageError(`${file} is empty`, 'a batch input file has one JSON request a line');
      const client = keyClient(ctx);
      const read = { bytes: 0 };
      const f = await uploadBatchFile(client, basename(file), readCounting(file, read), { sourceBytes: size, read: () => read.bytes, label: `uploading ${basename(file)}` });
      ctx.out.result(f, () => f.id);
      if (!ctx.out.json) ctx.out.note(`uploaded ${f.filename} (${f.bytes} bytes) as ${f.id}`);
    });
}
