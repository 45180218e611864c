import { ServiceError, invalid } from '@svc/shared';

/** One part of a multipart/form-data body. */
export interface Part {
  name: string;
  filename: string | null;
  data: Buffer;
}

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

/** The boundary of a `multipart/form-data` Content-Type, or a 415 naming what came instead. */
export function boundaryOf(contentType: string | undefined): string {
  const ct = contentType ?? '';
  if (!/^multipart\/form-data\s*(;|$)/i.test(ct)) {
    throw new ServiceError('unsupported_media_type', `This route takes multipart/form-data (fields purpose and file), not ${ct || '(no Content-Type)'}`);
  }
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(ct);
  const b = m?.[1] ?? m?.[2];
  if (!b) throw invalid('Content-Type: multipart/form-data needs a boundary parameter');
  return b;
}

/** Reads a Content-Disposition parameter, quoted (with backslash escapes) or bare; RFC 5987 `name*` wins. */
function dispositionParam(header: string, key: string): string | null {
  const ext = new RegExp(`;\\s*${key}\\*=([^']*)'[^']*'([^;]+)`, 'i').exec(header);
  if (ext) {
    try {
      return decodeURIComponent(ext[2]!.trim());
    } catch {
      /* fall through to the plain parameter */
    }
  }
  const quoted = new RegExp(`;\\s*${key}="((?:[^"\\\\]|\\\\.)*)"`, 'i').exec(header);
  if (quoted) return quoted[1]!.replace(/\\(.)/g, '$1');
  const bare = new RegExp(`;\\s*${key}=([^;\\s]+)`, 'i').exec(header);
  return bare ? bare[1]! : null;
}

/**
 * Splits a buffered multipart/form-data body into its parts (RFC 7578). Anything malformed is a 400 that
 * says what is wrong; part contents are never copied (they are views of the body).
 */
export function parseMultipart(body: Buffer, boundary: string): Part[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const bad = (why: string) => invalid(`multipart body: ${why}`);
  let pos = body.indexOf(delimiter);
  if (pos < 0) throw bad('no part starts with the boundary from Content-Type');
  const parts: Part[] = [];
  for (;;) {
    pos += delimiter.length;
    if (body.subarray(pos, pos + 2).toString() === '--') return parts; // the closing delimiter
    if (!body.subarray(pos, pos + 2).equals(CRLF)) throw bad('a boundary line does not end with CRLF');
    pos += 2;
    const headerEnd = body.indexOf(HEADER_END, pos);
    if (headerEnd < 0) throw bad('a part has no blank line after its headers');
    const headers = body.subarray(pos, headerEnd).toString('utf8').split('\r\n');
    const next = body.indexOf(Buffer.concat([CRLF, delimiter]), headerEnd + 4);
    if (next < 0) throw bad('the closing boundary is missing (truncated upload?)');
    const disposition = headers.find((h) => /^content-disposition:/i.test(h));
    if (!disposition || !/:\s*form-data\s*(;|$)/i.test(disposition)) throw bad('a part has no Content-Disposition: form-data header');
    const name = dispositionParam(disposition, 'name');
    if (!name) throw bad('a part has no name');
    parts.push({ name, filename: dispositionParam(disposition, 'filename'), data: body.subarray(headerEnd + 4, next) });
    if (parts.length > 16) throw bad('too many parts (send purpose and file)');
    pos = next + 2;
  }
}
