import { ServiceError, invalid } from '@svc/shared';

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

/** Where the content of one part goes, as it arrives; `end` once its closing boundary is seen. */
export interface PartSink {
  write(data: Buffer): void | Promise<void>;
  end(): void | Promise<void>;
}

/** Bytes of headers a part may have. */
const MAX_HEADER_BYTES = 16 * 1024;
/** Bytes before the first boundary (the preamble, which is ignored). */
const MAX_PREAMBLE_BYTES = 16 * 1024;

type State = 'preamble' | 'delimiter' | 'headers' | 'content' | 'done';

/**
 * Parses a multipart/form-data body (RFC 7578) as it arrives, in pieces cut anywhere: each part's content
 * is passed on to the sink `onPart` gives for it, never held whole. Only what may still turn out to be the
 * start of a boundary (fewer bytes than the boundary line) and a part's headers are held. Anything
 * malformed is a 400 that says what is wrong.
 */
export class MultipartParser {
  private readonly delimiter: Buffer;
  /** CRLF, then the delimiter: what ends a part's content. */
  private readonly close: Buffer;
  private held: Buffer = Buffer.alloc(0);
  private state: State = 'preamble';
  private sink: PartSink | null = null;
  private seen = 0;

  constructor(
    boundary: string,
    private readonly onPart: (name: string, filename: string | null) => PartSink,
  ) {
    this.delimiter = Buffer.from(`--${boundary}`);
    this.close = Buffer.concat([CRLF, this.delimiter]);
  }

  /** The next piece of the body; resolves once the sinks took what it held. */
  async write(piece: Buffer): Promise<void> {
    let buf = this.held.length ? Buffer.concat([this.held, piece]) : piece;
    this.held = Buffer.alloc(0);
    for (;;) {
      const rest = await this.step(buf);
      if (rest === null) return;
      buf = rest;
    }
  }

  /** The body ended: it must have ended with the closing boundary. */
  end(): void {
    if (this.state === 'preamble') throw bad('no part starts with the boundary from Content-Type');
    if (this.state !== 'done') throw bad('the closing boundary is missing (truncated upload?)');
  }

  /** Takes what it can from `buf`; returns the bytes left for the next step, or null once it needs more. */
  private async step(buf: Buffer): Promise<Buffer | null> {
    switch (this.state) {
      case 'done':
        return null; // the epilogue, ignored
      case 'preamble': {
        const at = buf.indexOf(this.delimiter);
        if (at < 0) {
          if (buf.length > MAX_PREAMBLE_BYTES) throw bad('no part starts with the boundary from Content-Type');
          return this.hold(buf);
        }
        this.state = 'delimiter';
        return buf.subarray(at + this.delimiter.length);
      }
      case 'delimiter': {
        if (buf.length < 2) return this.hold(buf);
        const two = buf.subarray(0, 2).toString('latin1');
        if (two === '--') {
          this.state = 'done';
          return null;
        }
        if (two !== '\r\n') throw bad('a boundary line does not end with CRLF');
        this.state = 'headers';
        return buf.subarray(2);
      }
      case 'headers': {
        const end = buf.indexOf(HEADER_END);
        if (end < 0) {
          if (buf.length > MAX_HEADER_BYTES) throw bad('a part has no blank line after its headers');
          return this.hold(buf);
        }
        this.sink = this.part(buf.subarray(0, end).toString('utf8').split('\r\n'));
        this.state = 'content';
        return buf.subarray(end + HEADER_END.length);
      }
      case 'content': {
        const at = buf.indexOf(this.close);
        if (at < 0) {
          // All but what could be the start of the closing boundary is this part's.
          const keep = Math.min(buf.length, this.close.length - 1);
          if (buf.length > keep) await this.sink!.write(buf.subarray(0, buf.length - keep));
          return this.hold(buf.subarray(buf.length - keep));
        }
        if (at > 0) await this.sink!.write(buf.subarray(0, at));
        await this.sink!.end();
        this.sink = null;
        this.state = 'delimiter';
        return buf.subarray(at + this.close.length);
      }
    }
  }

  private hold(buf: Buffer): null {
    this.held = Buffer.from(buf); // a copy: the piece it is cut from may be large
    return null;
  }

  private part(headers: string[]): PartSink {
    const disposition = headers.find((h) => /^content-disposition:/i.test(h));
    if (!disposition || !/:\s*form-data\s*(;|$)/i.test(disposition)) throw bad('a part has no Content-Disposition: form-data header');
    const name = dispositionParam(disposition, 'name');
    if (!name) throw bad('a part has no name');
    if (++this.seen > 16) throw bad('too many parts (send purpose and file)');
    return this.onPart(name, dispositionParam(disposition, 'filename'));
  }
}

const bad = (why: string) => invalid(`multipart body: ${why}`);
