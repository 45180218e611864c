import { describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { BatchInputCheck, parseBatchInput } from './jsonl.ts';

const chat = (id: string, text = 'hi') => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: text }] } });
const embed = (id: string) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/embeddings', body: { model: 'e', input: 'x' } });

/** The file pushed in pieces cut at `cuts` (byte offsets), then ended. */
function inPieces(file: Buffer, cuts: number[], maxLines = 100) {
  const seen: string[] = [];
  const check = new BatchInputCheck(maxLines, (l) => seen.push(`${l.line}:${l.custom_id}`));
  let from = 0;
  for (const c of [...cuts, file.length]) {
    check.push(file.subarray(from, c));
    from = c;
  }
  return { ...check.end(), seen };
}

/** Lines of a file checked whole with a line limit of `maxLineBytes`. */
function inPiecesWith(file: Buffer, maxLineBytes: number): number {
  const check = new BatchInputCheck(100, undefined, maxLineBytes);
  check.push(file);
  return check.end().lines;
}

function refusal(f: () => unknown): { message: string; line?: number } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return { message: (e as ServiceError).message, line: (e as ServiceError).extra.line as number | undefined };
  }
  throw new Error('not refused');
}

describe('BatchInputCheck', () => {
  // A byte order mark, a multi-byte character, CRLF endings and a trailing newline: cut anywhere, the same lines.
  const file = Buffer.from(`\uFEFF${chat('a', 'héllo ✓ 𝄞')}\r\n${embed('b')}\n${chat('c')}\r\n`);

  it('reads the same lines wherever the bytes are cut', () => {
    const whole = inPieces(file, []);
    expect(whole).toEqual({ lines: 3, endpoints: ['/v1/chat/completions', '/v1/embeddings'], seen: ['1:a', '2:b', '3:c'] });
    for (let i = 0; i <= file.length; i++) expect(inPieces(file, [i])).toEqual(whole);
    for (let i = 0; i + 2 <= file.length; i++) expect(inPieces(file, [i, i + 1, i + 2])).toEqual(whole);
  });

  it('keeps the bodies of the lines only for a caller that asks (parseBatchInput)', () => {
    const lines = parseBatchInput(file, 100);
    expect(lines.map((l) => [l.line, l.custom_id, l.url])).toEqual([
      [1, 'a', '/v1/chat/completions'],
      [2, 'b', '/v1/embeddings'],
      [3, 'c', '/v1/chat/completions'],
    ]);
    expect((lines[0]!.body.messages as Array<{ content: string }>)[0]!.content).toBe('héllo ✓ 𝄞');
  });

  it('a last line without a newline counts; a file of only a byte order mark is empty', () => {
    expect(inPieces(Buffer.from(`${chat('a')}\n${chat('b')}`), [3]).lines).toBe(2);
    expect(refusal(() => inPieces(Buffer.from([0xef, 0xbb, 0xbf]), [1])).message).toMatch(/^file: empty/);
    expect(refusal(() => inPieces(Buffer.alloc(0), [])).message).toMatch(/^file: empty/);
  });

  it('names the line of each problem, wherever it is cut', () => {
    const bad = Buffer.concat([Buffer.from(`${chat('a')}\n`), Buffer.from([0x7b, 0xe2, 0x9c]), Buffer.from(`\n${chat('c')}\n`)]);
    for (const cut of [0, 5, bad.indexOf(0xe2) + 1, bad.length - 1]) expect(refusal(() => inPieces(bad, [cut]))).toEqual({ message: 'file: line 2: not UTF-8 text (a batch input file is JSONL)', line: 2 });
    expect(refusal(() => inPieces(Buffer.from(`${chat('a')}\n\r\n${chat('b')}`), [])).message).toBe('file: line 2: empty line');
    expect(refusal(() => inPieces(Buffer.from(`${chat('a')}\n${chat('b')}\n${chat('a')}\n`), [])).message).toBe('file: line 3: custom_id "a" repeats line 1; each custom_id must be unique');
    // A half byte order mark is not one: the bytes are checked as text.
    expect(refusal(() => inPieces(Buffer.from([0xef, 0xbb]), [1])).message).toMatch(/^file: line 1: not UTF-8/);
  });

  it('a byte order mark starts the file only: on a later line it is not JSON', () => {
    expect(refusal(() => inPieces(Buffer.from(`${chat('a')}\n\uFEFF${chat('b')}\n`), [])).message).toMatch(/^file: line 2: not valid JSON/);
  });

  it('refuses a line longer than the limit as it arrives, before it is whole', () => {
    const check = new BatchInputCheck(100, undefined, 1000);
    const long = Buffer.from(chat('b', 'y'.repeat(2000)));
    check.push(Buffer.from(`${chat('a')}\n`));
    check.push(long.subarray(0, 600));
    expect(refusal(() => check.push(long.subarray(600, 1200)))).toEqual({ message: expect.stringMatching(/^file: line 2: longer than 1000 bytes; a line holds one request, at most 16777216 bytes/), line: 2 });
    // A line at the limit is fine, with or without its newline.
    const exact = Buffer.from(chat('c', 'z'.repeat(1000 - chat('c', '').length)));
    expect(exact.length).toBe(1000);
    expect(inPiecesWith(Buffer.concat([exact, Buffer.from('\n')]), 1000)).toBe(1);
    expect(inPiecesWith(exact, 1000)).toBe(1);
  });

  it('refuses the line past the limit', () => {
    const three = Buffer.from([chat('a'), chat('b'), chat('c')].join('\n'));
    expect(inPieces(three, [], 3).lines).toBe(3);
    expect(refusal(() => inPieces(three, [], 2)).message).toBe('file: more than 2 lines; a batch input file holds at most 2');
  });
});
