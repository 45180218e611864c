import { describe, expect, it } from 'vitest';
import { CHUNK_CHARS, CHUNK_OVERLAP, chunkText } from './chunking.ts';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');

describe('chunkText', () => {
  it('keeps a short text as one trimmed chunk, and drops an empty one', () => {
    expect(chunkText('  hello world \n')).toEqual(['hello world']);
    expect(chunkText(' \n\t ')).toEqual([]);
    expect(chunkText('x'.repeat(CHUNK_CHARS))).toEqual(['x'.repeat(CHUNK_CHARS)]);
  });

  it('cuts on word boundaries, each chunk at most the size, with the overlap repeated', () => {
    const text = words(1000);
    const chunks = chunkText(text);
    expect(chunks.length).toBeGreaterThan(text.length / CHUNK_CHARS);
    const all = new Set(text.split(' '));
    for (const [i, c] of chunks.entries()) {
      expect(c.length).toBeLessThanOrEqual(CHUNK_CHARS);
      if (i < chunks.length - 1) expect(c.length).toBeGreaterThan(CHUNK_CHARS / 2);
      for (const w of c.split(' ')) expect(all.has(w), `chunk ${i} holds a cut word "${w}"`).toBe(true);
      if (i > 0) {
        // The chunk starts with words the previous one ended with: at most the overlap of them.
        const prev = chunks[i - 1]!;
        const first = c.split(' ')[0]!;
        const at = prev.lastIndexOf(` ${first} `);
        expect(at).toBeGreaterThan(-1);
        expect(prev.length - at).toBeLessThanOrEqual(CHUNK_OVERLAP + 1);
      }
    }
    // Every word is in some chunk, in order.
    expect(chunks.join(' ').split(' ').filter((w, i, a) => a.indexOf(w) === i)).toEqual(text.split(' '));
  });

  it('cuts a run without whitespace where the window ends, never inside a surrogate pair', () => {
    const text = '😀'.repeat(1000); // 2000 code units, no whitespace
    const chunks = chunkText(text);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(CHUNK_CHARS);
      expect(c).toMatch(/^(😀)+$/u);
    }
    expect(chunks.length).toBe(3);
  });

  it('refuses an overlap that would not move forward', () => {
    expect(() => chunkText('abc', 10, 5)).toThrow();
  });
});
