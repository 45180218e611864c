import { randomBytes } from 'node:crypto';
import { ApiError, type SvcClient } from '@svc/shared/client';
import { bytesText, progressBar } from './progress-bar.ts';

/** A file as the gateway shows it (POST /v1/files). */
export interface FileObject {
  id: string;
  bytes: number;
  filename: string;
  purpose: string;
  expires_at: number;
}

/** Uploads of at least this many bytes get a progress bar (on a terminal). */
const BAR_FROM_BYTES = 1024 * 1024;

/**
 * Uploads a batch input file as the multipart body of POST /v1/files (purpose=batch), streamed: `content`
 * yields the file's bytes as they are read (`read()` says how many bytes of the source were read so far, of
 * `sourceBytes`, for the progress bar; the bar shows on a terminal for large files only).
 */
export async function uploadBatchFile(
  client: SvcClient,
  filename: string,
  content: AsyncIterable<Buffer>,
  progress: { sourceBytes: number; read(): number; label: string },
): Promise<FileObject> {
  const boundary = `svc-${randomBytes(12).toString('hex')}`;
  const safeName = filename.replace(/["\r\n\\]/g, '_');
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${safeName}"\r\nContent-Type: application/jsonl\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const bar = progress.sourceBytes >= BAR_FROM_BYTES ? progressBar(progress.label, progress.sourceBytes, { format: (d, t) => `${bytesText(d)} of ${bytesText(t)}` }) : null;
  const it = content[Symbol.asyncIterator]();
  let stage: 'head' | 'body' | 'tail' | 'done' = 'head';
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      if (stage === 'head') {
        stage = 'body';
        ctrl.enqueue(head);
        return;
      }
      if (stage === 'body') {
        const next = await it.next();
        if (!next.done) {
          ctrl.enqueue(next.value);
          bar?.update(progress.read());
          return;
        }
        stage = 'tail';
      }
      if (stage === 'tail') {
        stage = 'done';
        ctrl.enqueue(tail);
        ctrl.close();
      }
    },
    async cancel() {
      await it.return?.();
    },
  });
  try {
    const res = await client.raw('POST', '/v1/files', { body, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } });
    const answer = await res.json().catch(() => undefined);
    if (!res.ok) throw new ApiError(res.status, answer, res.headers);
    return answer as FileObject;
  } finally {
    bar?.stop();
  }
}
