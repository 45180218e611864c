/**
 * A text folded for matching words whatever their case or Unicode form: NFKC, then case folding (upper then
 * lower case, so `ß` folds to `ss` and a final sigma to `σ`), and every run of white space as one space. Each
 * folded character remembers the span of the original it came from, so a match in the folded text redacts
 * exactly the original characters it covers.
 */
export interface FoldedView {
  text: string;
  /** Original start of the piece each folded character came from; null: the identity (ASCII, single spaces). */
  starts: Int32Array | null;
  ends: Int32Array | null;
}

const COMBINING = /\p{M}/u;
const SPACE = /\s/;

/** One piece of the original (a character and the combining marks after it) folded. */
export function foldPiece(s: string): string {
  return s.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/** A term (a blocklist entry) folded the same way, trimmed. */
export function fold(term: string): string {
  return foldedView(term.trim()).text;
}

/** ASCII: folding is lower-casing, and white space characters that stand alone become spaces in place. */
const ASCII = /^[\x00-\x7f]*$/;
const SPACE_RUN = /\s\s/;
const ASCII_SPACE = /[\t\n\v\f\r]/g;

const isSpace = (c: number, ch: string) => c === 32 || (c >= 9 && c <= 13) || (c >= 0x80 && SPACE.test(ch));

export function foldedView(text: string): FoldedView {
  if (ASCII.test(text) && !SPACE_RUN.test(text)) return { text: text.toLowerCase().replace(ASCII_SPACE, ' '), starts: null, ends: null };
  let out = '';
  const starts: number[] = [];
  const ends: number[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isSpace(c, text[i]!)) {
      let j = i + 1;
      while (j < n && isSpace(text.charCodeAt(j), text[j]!)) j++;
      out += ' ';
      starts.push(i);
      ends.push(j);
      i = j;
      continue;
    }
    // A code point (a surrogate pair counts once) and the combining marks after it.
    let j = i + (c >= 0xd800 && c <= 0xdbff && i + 1 < n ? 2 : 1);
    while (j < n && text.charCodeAt(j) >= 0x300 && COMBINING.test(String.fromCodePoint(text.codePointAt(j)!))) j += text.codePointAt(j)! > 0xffff ? 2 : 1;
    if (c < 0x80 && j === i + 1) {
      out += c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : text[i];
      starts.push(i);
      ends.push(j);
      i = j;
      continue;
    }
    const f = foldPiece(text.slice(i, j));
    for (let k = 0; k < f.length; k++) {
      starts.push(i);
      ends.push(j);
    }
    out += f;
    i = j;
  }
  return { text: out, starts: Int32Array.from(starts), ends: Int32Array.from(ends) };
}

/** The original span of folded [from, to). */
export function originalSpan(v: FoldedView, from: number, to: number): [number, number] {
  if (!v.starts || !v.ends) return [from, to];
  return [v.starts[from]!, v.ends[to - 1]!];
}
