/**
 * A text folded for matching words whatever their case or Unicode form: NFKC, then case folding (upper then
 * lower case, so `ß` folds to `ss` and a final sigma to `σ`), and every run of white space as one space. Each
 * folded character remembers the span of the original it came from, so a match in the folded text redacts
 * exactly the original characters it covers. The map is built only when a match asks for it.
 */
export interface FoldedView {
  text: string;
  /** The original is plain ASCII. */
  ascii: boolean;
  /** Original [start, end) of the piece each folded character came from; null: the identity. */
  map(): { starts: Int32Array; ends: Int32Array } | null;
}

const COMBINING = /\p{M}/u;
const SPACE = /\s/;
const ASCII = /^[\x00-\x7f]*$/;
const SPACE_RUN = /[\t\n\v\f\r ]{2}/;
const ASCII_SPACES = /[\t\n\v\f\r]/g;
const ASCII_SPACE_HINT = /[\t\n\v\f\r]/;
/** What `\s+` to one space changes in ASCII text: runs of two or more, and lone white space other than a space. */
const ASCII_SPACE_RUNS = /[\t\n\v\f\r ]{2,}|[\t\n\v\f\r]/g;

/** One piece of the original (a character and the combining marks after it) folded. */
export function foldPiece(s: string): string {
  return s.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/** A term (a blocklist entry) folded the same way, trimmed. */
export function fold(term: string): string {
  return foldedView(term.trim()).text;
}

const isAsciiSpace = (c: number) => c === 32 || (c >= 9 && c <= 13);
const isSpace = (c: number, ch: string) => isAsciiSpace(c) || (c >= 0x80 && SPACE.test(ch));

const IDENTITY = () => null;

/** The last view made: the detectors of one scan fold the same text. */
let last: { text: string; view: FoldedView } | null = null;

export function foldedView(text: string): FoldedView {
  if (last && last.text === text) return last.view;
  const view = build(text);
  last = { text, view };
  return view;
}

function build(text: string): FoldedView {
  if (ASCII.test(text)) {
    const lower = text.toLowerCase();
    // Single white space characters become spaces in place: positions do not move.
    if (!SPACE_RUN.test(text)) return { text: ASCII_SPACE_HINT.test(text) ? lower.replace(ASCII_SPACES, ' ') : lower, ascii: true, map: IDENTITY };
    return { text: lower.replace(ASCII_SPACE_RUNS, ' '), ascii: true, map: once(() => asciiMap(text)) };
  }
  return {
    text: foldText(text),
    ascii: false,
    map: once(() => general(text)),
  };
}

/** The folded text alone (what `general` makes, without the map): runs of printable ASCII lower-cased in bulk. */
function foldText(text: string): string {
  let out = '';
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c > 0x20 && c < 0x7f) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d <= 0x20 || d >= 0x7f) break;
        j++;
      }
      // The last character of a run may carry combining marks: it is folded with them below.
      if (j < n && text.charCodeAt(j) >= 0x300) j--;
      if (j > i) {
        out += text.slice(i, j).toLowerCase();
        i = j;
        continue;
      }
    }
    if (isSpace(c, text[i]!)) {
      let j = i + 1;
      while (j < n && isSpace(text.charCodeAt(j), text[j]!)) j++;
      out += ' ';
      i = j;
      continue;
    }
    let j = i + (c >= 0xd800 && c <= 0xdbff && i + 1 < n ? 2 : 1);
    while (j < n && text.charCodeAt(j) >= 0x300 && COMBINING.test(String.fromCodePoint(text.codePointAt(j)!))) j += text.codePointAt(j)! > 0xffff ? 2 : 1;
    out += c < 0x80 && j === i + 1 ? (c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : text[i]!) : foldPiece(text.slice(i, j));
    i = j;
  }
  return out;
}

const once = <T>(f: () => T) => {
  let v: T | undefined;
  return () => (v ??= f());
};

/** ASCII with runs of white space: each run is one folded space. */
function asciiMap(text: string): { starts: Int32Array; ends: Int32Array } {
  const n = text.length;
  const starts = new Int32Array(n);
  const ends = new Int32Array(n);
  let j = 0;
  for (let i = 0; i < n; ) {
    let k = i + 1;
    if (isAsciiSpace(text.charCodeAt(i))) while (k < n && isAsciiSpace(text.charCodeAt(k))) k++;
    starts[j] = i;
    ends[j] = k;
    j++;
    i = k;
  }
  return { starts: starts.subarray(0, j), ends: ends.subarray(0, j) };
}

/**
 * The map of a text `foldText` folds: for each folded character, the original piece it came from. The same
 * segmentation as `foldText`, counting folded lengths instead of building the text.
 */
function general(text: string): { starts: Int32Array; ends: Int32Array } {
  const n = text.length;
  let starts = new Int32Array(n + 16);
  let ends = new Int32Array(n + 16);
  let k = 0;
  const ensure = (count: number) => {
    if (k + count <= starts.length) return;
    const size = Math.max(starts.length * 2, k + count);
    const s2 = new Int32Array(size);
    const e2 = new Int32Array(size);
    s2.set(starts.subarray(0, k));
    e2.set(ends.subarray(0, k));
    starts = s2;
    ends = e2;
  };
  const put = (from: number, to: number, count: number) => {
    ensure(count);
    starts.fill(from, k, k + count);
    ends.fill(to, k, k + count);
    k += count;
  };
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c > 0x20 && c < 0x7f) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d <= 0x20 || d >= 0x7f) break;
        j++;
      }
      if (j < n && text.charCodeAt(j) >= 0x300) j--;
      if (j > i) {
        ensure(j - i);
        for (let p = i; p < j; p++, k++) {
          starts[k] = p;
          ends[k] = p + 1;
        }
        i = j;
        continue;
      }
    }
    if (isSpace(c, text[i]!)) {
      let j = i + 1;
      while (j < n && isSpace(text.charCodeAt(j), text[j]!)) j++;
      put(i, j, 1);
      i = j;
      continue;
    }
    let j = i + (c >= 0xd800 && c <= 0xdbff && i + 1 < n ? 2 : 1);
    while (j < n && text.charCodeAt(j) >= 0x300 && COMBINING.test(String.fromCodePoint(text.codePointAt(j)!))) j += text.codePointAt(j)! > 0xffff ? 2 : 1;
    put(i, j, c < 0x80 && j === i + 1 ? 1 : foldPiece(text.slice(i, j)).length);
    i = j;
  }
  return { starts: starts.subarray(0, k), ends: ends.subarray(0, k) };
}

/** The original span of folded [from, to). */
export function originalSpan(v: FoldedView, from: number, to: number): [number, number] {
  const m = v.map();
  if (!m) return [from, to];
  return [m.starts[from]!, m.ends[to - 1]!];
}
