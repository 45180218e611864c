import { describe, expect, it } from 'vitest';
import { MultipartParser, boundaryOf } from './multipart.ts';

const B = 'xYz-42';
const body = (parts: Array<{ head: string; content: string | Buffer }>, end = `--${B}--\r\n`) =>
  Buffer.concat([Buffer.from('preamble to ignore\r\n'), ...parts.flatMap((p) => [Buffer.from(`--${B}\r\n${p.head}\r\n\r\n`), Buffer.from(p.content), Buffer.from('\r\n')]), Buffer.from(end)]);

/** Parses `b` fed in pieces cut at `cuts`; returns each part with its content joined, and the largest write a sink got. */
async function parse(b: Buffer, cuts: number[]) {
  const parts: Array<{ name: string; filename: string | null; content: string; ended: boolean }> = [];
  let biggest = 0;
  const p = new MultipartParser(B, (name, filename) => {
    const part = { name, filename, content: '', ended: false };
    parts.push(part);
    return {
      write: async (d) => {
        biggest = Math.max(biggest, d.length);
        await new Promise((r) => setImmediate(r)); // a sink that takes its time: the parser waits for it
        part.content += d.toString('latin1');
      },
      end: () => void (part.ended = true),
    };
  });
  let from = 0;
  for (const c of [...cuts, b.length]) {
    await p.write(b.subarray(from, c));
    from = c;
  }
  p.end();
  return { parts, biggest };
}

async function refusal(b: Buffer, cuts: number[] = []): Promise<string> {
  return parse(b, cuts).then(
    () => 'parsed',
    (e: Error) => e.message,
  );
}

describe('MultipartParser', () => {
  // Content that looks like the boundary without being it: CRLF and dashes, the boundary without its CRLF before it.
  const tricky = `line one\r\n--xYz-4 not it\r\n-${B}\r\n\r\n--${B.slice(0, 3)}\r`;
  const b = body([
    { head: 'Content-Disposition: form-data; name="purpose"', content: 'batch' },
    { head: `Content-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/octet-stream`, content: tricky },
    { head: 'content-disposition: form-data; name="empty"', content: '' },
  ]);
  const want = [
    { name: 'purpose', filename: null, content: 'batch', ended: true },
    { name: 'file', filename: 'in.jsonl', content: tricky, ended: true },
    { name: 'empty', filename: null, content: '', ended: true },
  ];

  it('gives the same parts wherever the body is cut', async () => {
    expect((await parse(b, [])).parts).toEqual(want);
    for (let i = 0; i <= b.length; i++) expect((await parse(b, [i])).parts).toEqual(want);
    for (let i = 0; i + 3 <= b.length; i += 2) expect((await parse(b, [i, i + 1, i + 3])).parts).toEqual(want);
  });

  it('passes a large part on as it arrives, never holding it whole', async () => {
    const big = Buffer.alloc(1 << 20, 'a');
    const bb = body([{ head: 'Content-Disposition: form-data; name="file"; filename="f"', content: big }]);
    const cuts = Array.from({ length: Math.floor(bb.length / 65536) }, (_, i) => (i + 1) * 65536);
    const { parts, biggest } = await parse(bb, cuts);
    expect(parts[0]!.content.length).toBe(big.length);
    expect(biggest).toBeLessThanOrEqual(65536 + 64);
  });

  it('refuses what is malformed, saying what', async () => {
    expect(await refusal(Buffer.from('no boundary here'))).toBe('multipart body: no part starts with the boundary from Content-Type');
    expect(await refusal(body([{ head: 'Content-Disposition: form-data; name="a"', content: 'x' }], ''))).toBe('multipart body: the closing boundary is missing (truncated upload?)');
    expect(await refusal(Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="a"\r\n\r\nhalf a part`), [20])).toBe('multipart body: the closing boundary is missing (truncated upload?)');
    expect(await refusal(Buffer.from(`--${B}xx`))).toBe('multipart body: a boundary line does not end with CRLF');
    expect(await refusal(body([{ head: 'Content-Type: text/plain', content: 'x' }]))).toBe('multipart body: a part has no Content-Disposition: form-data header');
    expect(await refusal(body([{ head: 'Content-Disposition: form-data', content: 'x' }]))).toBe('multipart body: a part has no name');
    expect(await refusal(Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="a"${'x'.repeat(20_000)}`), [100, 9000])).toBe('multipart body: a part has no blank line after its headers');
    expect(await refusal(body(Array.from({ length: 17 }, (_, i) => ({ head: `Content-Disposition: form-data; name="p${i}"`, content: '' }))))).toBe('multipart body: too many parts (send purpose and file)');
  });

  it('reads names quoted, bare and RFC 5987, and the boundary from Content-Type', async () => {
    const names = body([
      { head: 'Content-Disposition: form-data; name=bare; filename="a \\"q\\".jsonl"', content: '' },
      { head: `Content-Disposition: form-data; name="n"; filename="plain"; filename*=UTF-8''%C3%A9t%C3%A9.jsonl`, content: '' },
    ]);
    expect((await parse(names, [])).parts.map((p) => [p.name, p.filename])).toEqual([
      ['bare', 'a "q".jsonl'],
      ['n', 'été.jsonl'],
    ]);
    expect(boundaryOf('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(boundaryOf('Multipart/Form-Data;boundary=xyz')).toBe('xyz');
    expect(() => boundaryOf('application/json')).toThrow(/takes multipart\/form-data/);
    expect(() => boundaryOf('multipart/form-data')).toThrow(/needs a boundary/);
  });
});
