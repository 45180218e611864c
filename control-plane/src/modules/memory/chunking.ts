/**
 * How a document is cut into chunks before embedding: pieces of at most CHUNK_CHARS characters (UTF-16 code
 * units, as JavaScript and the API count them), each starting about CHUNK_OVERLAP characters before the end of
 * the previous one so a sentence cut at a boundary is whole in one of the two. Cuts fall on whitespace: a
 * chunk ends at the last whitespace of its window (but not in its first half), and the next one starts at
 * the first word that begins inside the overlap. A run without whitespace longer than a window (a long URL,
 * base64) is cut where the window ends, never inside a surrogate pair. Chunks are trimmed; empty ones dropped.
 */
export const CHUNK_CHARS = 800;
export const CHUNK_OVERLAP = 100;

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13 || c === 12 || c === 11 || c === 0xa0 || c === 0x2028 || c === 0x2029 || c === 0x3000 || (c >= 0x2000 && c <= 0x200a);
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** Moves a hard cut back off the middle of a surrogate pair. */
const safeCut = (text: string, at: number) => (at > 0 && at < text.length && isLowSurrogate(text.charCodeAt(at)) ? at - 1 : at);

export function chunkText(text: string, size = CHUNK_CHARS, overlap = CHUNK_OVERLAP): string[] {
  if (size < 2 || overlap < 0 || overlap >= size / 2) throw new Error('chunk size must exceed twice the overlap');
  const out: string[] = [];
  const push = (s: string) => {
    const t = s.trim();
    if (t) out.push(t);
  };
  let start = 0;
  while (start < text.length && isSpace(text.charCodeAt(start))) start++;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    if (end < text.length) {
      // The last whitespace in the window's second half ends the chunk; none there: a hard cut.
      let cut = end;
      while (cut > start + size / 2 && !isSpace(text.charCodeAt(cut))) cut--;
      end = cut > start + size / 2 ? cut : safeCut(text, end);
    }
    push(text.slice(start, end));
    if (end >= text.length) break;
    // The next chunk starts at the first word beginning in [end - overlap, end]; none: at end - overlap.
    let next = Math.max(start + 1, end - overlap);
    let word = next;
    while (word < end && !(isSpace(text.charCodeAt(word - 1)) && !isSpace(text.charCodeAt(word)))) word++;
    next = word < end ? word : safeCut(text, next);
    while (next < text.length && isSpace(text.charCodeAt(next))) next++;
    start = next;
  }
  return out;
}
