/**
 * The pieces every detector shares. A detector finds matches in a text; a match is a span of UTF-16 code
 * units with the category it belongs to. Matched text never leaves the scan: findings carry categories and
 * counts only.
 */
export const DETECTOR_TYPES = ['pii', 'secrets', 'prompt_injection', 'blocklist'] as const;
export type DetectorType = (typeof DETECTOR_TYPES)[number];

export const ACTIONS = ['allow', 'redact', 'block'] as const;
export type Action = (typeof ACTIONS)[number];

export const DIRECTIONS = ['input', 'output'] as const;
export type Direction = (typeof DIRECTIONS)[number];

export type Severity = 'low' | 'medium' | 'high' | 'critical';

/** The action that wins where several apply to one span: block over redact over allow. */
export const ACTION_RANK: Record<Action, number> = { allow: 0, redact: 1, block: 2 };

export interface Match {
  start: number;
  end: number;
  category: string;
  severity: Severity;
  /**
   * A match that runs on while its characters do (a token whose length is not fixed): in a stream, a match
   * that reaches the end of what arrived so far goes on swallowing characters this function accepts.
   */
  tail?: (code: number) => boolean;
  /** A block (a PEM private key) that ends with this marker: in a stream, everything up to it is swallowed. */
  until?: RegExp;
}

/**
 * One detector as configured. `maxSpan` bounds what it must see at once to decide a match: the longest match
 * of a bounded pattern, or the decisive prefix of a match that runs on (`tail`, `until`). A stream holds back
 * that much (plus a small margin) and no more.
 */
export interface Detector {
  readonly type: DetectorType;
  /** Identifies the configuration: equal keys find the same matches. */
  readonly key: string;
  readonly maxSpan: number;
  /** Every match in `text`, ordered by start, not overlapping one another. */
  find(text: string): Match[];
}

const TOKEN = new Uint8Array(128);
for (let c = 0; c < 128; c++) TOKEN[c] = (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 43 || c === 45 || c === 47 || c === 61 || c === 95 ? 1 : 0;

/** Characters of a token (base64, base64url, hex, API-key alphabets). */
export const isTokenChar = (c: number): boolean => c < 128 && TOKEN[c] === 1;

/** ASCII letters and digits. */
export const isAlnum = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

export const isDigit = (c: number): boolean => c >= 48 && c <= 57;

/** Runs `re` (global or sticky-free, with the `g` flag) over `text`, calling `each` per match; `each` returns the match to keep, or null. */
export function eachMatch(re: RegExp, text: string, each: (m: RegExpExecArray) => Match | null, out: Match[]): void {
  re.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const kept = each(m);
    if (kept) out.push(kept);
    if (m[0].length === 0) re.lastIndex++;
  }
}

/** Matches of several sources merged into one ordered list without overlaps (the earlier, then the longer, wins). */
export function ordered(matches: Match[]): Match[] {
  if (matches.length < 2) return matches;
  matches.sort((a, b) => a.start - b.start || b.end - a.end);
  const out: Match[] = [matches[0]!];
  for (let i = 1; i < matches.length; i++) {
    const m = matches[i]!;
    if (m.start >= out[out.length - 1]!.end) out.push(m);
  }
  return out;
}
