import { StringDecoder } from 'node:string_decoder';

export type Emit = (stream: 'stdout' | 'stderr', text: string) => void;

/** A chunk of output is at most this many bytes (the channel's limit is 1 MiB of text). */
const CHUNK_BYTES = 256 * 1024;

/**
 * One output stream of a program: forwards at most `cap` bytes as UTF-8 text chunks, counts what it
 * forwarded, and remembers whether more was produced (then truncated). Bytes past the cap are read and
 * dropped, so the program is not blocked on a full pipe.
 */
export class OutputSink {
  private readonly decoder = new StringDecoder('utf8');
  bytes = 0;
  truncated = false;

  constructor(
    private readonly stream: 'stdout' | 'stderr',
    private readonly cap: number,
    private readonly emit: Emit,
  ) {}

  write(buf: Buffer): void {
    if (buf.length === 0) return;
    const room = this.cap - this.bytes;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const take = buf.length > room ? buf.subarray(0, room) : buf;
    if (take.length < buf.length) this.truncated = true;
    this.bytes += take.length;
    for (let i = 0; i < take.length; i += CHUNK_BYTES) this.send(this.decoder.write(take.subarray(i, i + CHUNK_BYTES)));
  }

  end(): void {
    this.send(this.decoder.end());
  }

  private send(text: string): void {
    if (text.length > 0) this.emit(this.stream, text);
  }
}

/**
 * Splits Docker's multiplexed attach stream (8-byte frame headers: stream type, 3 zero bytes, big-endian
 * length) into stdout and stderr, across arbitrary chunk boundaries.
 */
export class Demuxer {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly out: (stream: 'stdout' | 'stderr', data: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 8) {
      const type = this.pending[0];
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) return;
      const data = this.pending.subarray(8, 8 + size);
      this.pending = this.pending.subarray(8 + size);
      this.out(type === 2 ? 'stderr' : 'stdout', data);
    }
  }
}

/**
 * Finds the runner's end-of-program line (`<marker><exit code>\n`, written by the runner's shell to stderr
 * after the program exits) in a stderr stream, forwarding everything before it. Bytes that might be the
 * start of the marker are held back until the next chunk tells.
 */
export class ExitMarker {
  private readonly marker: Buffer;
  private held: Buffer = Buffer.alloc(0);
  private tail: Buffer | undefined;
  exitCode: number | undefined;

  constructor(
    marker: string,
    private readonly forward: (data: Buffer) => void,
  ) {
    this.marker = Buffer.from(marker);
  }

  /** Returns true once the whole marker line has been seen. */
  push(chunk: Buffer): boolean {
    if (this.exitCode !== undefined) return true;
    if (this.tail) {
      this.tail = Buffer.concat([this.tail, chunk]);
      return this.parseTail();
    }
    const data = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk;
    const at = data.indexOf(this.marker);
    if (at >= 0) {
      this.forward(data.subarray(0, at));
      this.held = Buffer.alloc(0);
      this.tail = data.subarray(at + this.marker.length);
      return this.parseTail();
    }
    let keep = Math.min(this.marker.length - 1, data.length);
    while (keep > 0 && !this.marker.subarray(0, keep).equals(data.subarray(data.length - keep))) keep--;
    this.forward(data.subarray(0, data.length - keep));
    this.held = Buffer.from(data.subarray(data.length - keep));
    return false;
  }

  /** What was held back, when the stream ends without the marker. */
  flush(): void {
    if (this.held.length > 0) this.forward(this.held);
    this.held = Buffer.alloc(0);
  }

  private parseTail(): boolean {
    const nl = this.tail!.indexOf('\n');
    if (nl < 0) return false;
    const n = Number(this.tail!.subarray(0, nl).toString('latin1'));
    this.exitCode = Number.isInteger(n) ? n : -1;
    return true;
  }
}
