import { trieSource } from './blocklist.ts';
import { eachMatch, isAlnum, isTokenChar, ordered, type Detector, type Match, type Severity } from './types.ts';

/**
 * Credentials (docs/guardrails.md lists each format and where it comes from):
 * - private_key: a PEM or OpenSSH private key block (`-----BEGIN ... PRIVATE KEY-----` or `-----BEGIN PGP
 *   PRIVATE KEY BLOCK-----`) through its END line, or to the end of the text when it has none;
 * - evm_private_key: `0x` and exactly 64 hex digits (a secp256k1 key as wallets export it). A transaction
 *   hash has the same form and is matched too: the two cannot be told apart;
 * - aws_access_key: `AKIA` or `ASIA` and 16 upper-case letters or digits;
 * - github_token: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` and 36 letters or digits; `github_pat_` and 82;
 * - slack_token: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-` and at least 10 more token characters;
 * - stripe_key: `sk_live_`, `rk_live_` (and the `_test_` forms) and at least 24 letters or digits;
 * - openai_api_key: `sk-`, `sk-proj-`, `sk-svcacct-`, `sk-admin-` and at least 20 token characters;
 * - svc_api_key: this gateway's own `sk-svc_` secrets;
 * - google_api_key: `AIza` and 35 token characters;
 * - jwt: three base64url segments, the first two starting `eyJ` (a JSON object), dot-separated;
 * - high_entropy_token: a run of at least 32 token characters (letters, digits, `+/=_-`) with upper-case
 *   letters, lower-case letters and digits whose first 40 characters carry at least 4.3 bits of Shannon
 *   entropy per character (random base64 carries about 5; hex digests at most 4, so they are never matched);
 *   a whole line of a PEM body (a certificate's, a public key's: 64 base64 characters, or a line ending the
 *   block) is not one.
 * A token whose length is not fixed runs on to the end of its characters.
 */
export const SECRET_CATEGORIES = [
  'private_key',
  'evm_private_key',
  'aws_access_key',
  'github_token',
  'slack_token',
  'stripe_key',
  'openai_api_key',
  'svc_api_key',
  'google_api_key',
  'jwt',
  'high_entropy_token',
] as const;
export type SecretCategory = (typeof SECRET_CATEGORIES)[number];

export const SECRET_SEVERITY: Record<SecretCategory, Severity> = {
  private_key: 'critical',
  evm_private_key: 'critical',
  aws_access_key: 'high',
  github_token: 'high',
  slack_token: 'high',
  stripe_key: 'critical',
  openai_api_key: 'high',
  svc_api_key: 'high',
  google_api_key: 'high',
  jwt: 'medium',
  high_entropy_token: 'medium',
};

/** Entropy (bits per character) a high_entropy_token's first ENTROPY_WINDOW characters must reach. */
export const ENTROPY_THRESHOLD = 4.3;
export const ENTROPY_WINDOW = 40;
export const ENTROPY_MIN_LENGTH = 32;

const PEM_BEGIN = /-----BEGIN (?:(?:RSA|EC|DSA|OPENSSH|ENCRYPTED|ED25519) )?PRIVATE KEY-----|-----BEGIN PGP PRIVATE KEY BLOCK-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/;

/** Characters that continue a token of each kind. */
const alnum = isAlnum;
const word = (c: number) => isAlnum(c) || c === 95 || c === 45; // base64url and key alphabets: letters, digits, _ -
const jwtChar = (c: number) => word(c) || c === 46;

interface TokenRule {
  category: SecretCategory;
  /** The decisive prefix, bounded; a `g` regex. */
  re: RegExp;
  /** Continues the token past the prefix (variable-length tokens); absent: the prefix is the whole token. */
  tail?: (c: number) => boolean;
  /** What may not follow a fixed-length token. */
  after?: (c: number) => boolean;
  span: number;
  /** Literal prefixes: every match starts with one of them. */
  needles: string[];
}

const RULES: TokenRule[] = [
  { category: 'evm_private_key', re: /(?<![0-9A-Za-z])0x[0-9a-fA-F]{64}/g, after: alnum, span: 67, needles: ['0x'] },
  { category: 'aws_access_key', re: /(?<![0-9A-Za-z])(?:AKIA|ASIA)[0-9A-Z]{16}/g, after: alnum, span: 21, needles: ['AKIA', 'ASIA'] },
  { category: 'github_token', re: /(?<![0-9A-Za-z_])gh[pousr]_[A-Za-z0-9]{36}/g, after: alnum, span: 41, needles: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_'] },
  { category: 'github_token', re: /(?<![0-9A-Za-z_])github_pat_[A-Za-z0-9_]{82}/g, after: word, span: 94, needles: ['github_pat_'] },
  { category: 'slack_token', re: /(?<![0-9A-Za-z_-])xox[abposr]-[A-Za-z0-9-]{10}/g, tail: (c) => alnum(c) || c === 45, span: 16, needles: ['xox'] },
  { category: 'stripe_key', re: /(?<![0-9A-Za-z_])[sr]k_(?:live|test)_[A-Za-z0-9]{24}/g, tail: alnum, span: 33, needles: ['sk_live_', 'rk_live_', 'sk_test_', 'rk_test_'] },
  { category: 'svc_api_key', re: /(?<![0-9A-Za-z_-])sk-svc_[A-Za-z0-9]{16}/g, tail: word, span: 24, needles: ['sk-svc_'] },
  { category: 'openai_api_key', re: /(?<![0-9A-Za-z_-])sk-(?!svc_)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20}/g, tail: word, span: 33, needles: ['sk-'] },
  { category: 'google_api_key', re: /(?<![0-9A-Za-z_-])AIza[0-9A-Za-z_-]{35}/g, after: word, span: 40, needles: ['AIza'] },
  { category: 'jwt', re: /(?<![0-9A-Za-z_.-])eyJ[A-Za-z0-9_-]{10,100}\.eyJ[A-Za-z0-9_-]{4}/g, tail: jwtChar, span: 112, needles: ['eyJ'] },
];

const counts = new Int32Array(65536);

/** Shannon entropy in bits per character of s[from, to). */
export function entropy(s: string, from = 0, to = s.length): number {
  const n = to - from;
  let h = 0;
  for (let i = from; i < to; i++) counts[s.charCodeAt(i)]!++;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    const k = counts[c]!;
    if (k === 0) continue;
    const p = k / n;
    h -= p * Math.log2(p);
    counts[c] = 0;
  }
  return h;
}

const isBase64 = (c: number) => isAlnum(c) || c === 43 || c === 47 || c === 61;

/**
 * A whole line of a PEM body (RFC 7468 writes base64 in lines of 64): a certificate's or public key's, which are
 * not secrets (a private key's block is matched as a whole by `pem`). Decided within 12 characters after the run.
 */
function pemBodyLine(text: string, i: number, j: number): boolean {
  if (i > 0 && text.charCodeAt(i - 1) !== 10) return false;
  for (let k = i; k < j; k++) if (!isBase64(text.charCodeAt(k))) return false;
  return (j - i === 64 && text.charCodeAt(j) === 10) || text.startsWith('\n-----END ', j) || text.startsWith('-----END ', j);
}


const TOKEN = new Uint8Array(128);
for (let c = 0; c < 128; c++) TOKEN[c] = isTokenChar(c) ? 1 : 0;

const tokenAt = (text: string, i: number) => {
  const c = text.charCodeAt(i);
  return c < 128 && TOKEN[c] === 1;
};

/**
 * Runs of token characters at least ENTROPY_MIN_LENGTH long whose head looks random. Such a run starting at or
 * after `i` covers i + ENTROPY_MIN_LENGTH - 1: only the run through that character is read (back to its start,
 * on to its end), and when it is too short the search goes on past it, so most characters are never read.
 */
function highEntropy(text: string, out: Match[]): void {
  const n = text.length;
  const reach = ENTROPY_MIN_LENGTH - 1;
  for (let i = 0; i + reach < n; ) {
    const probe = i + reach;
    if (!tokenAt(text, probe)) {
      i = probe + 1;
      continue;
    }
    let start = probe;
    while (start > i && tokenAt(text, start - 1)) start--;
    let end = probe + 1;
    while (end < n && tokenAt(text, end)) end++;
    if (end - start >= ENTROPY_MIN_LENGTH && looksRandom(text, start, end)) {
      out.push({ start, end, category: 'high_entropy_token', severity: SECRET_SEVERITY.high_entropy_token, tail: isTokenChar });
    }
    i = end + 1;
  }
}

/** The run text[i, j): upper- and lower-case letters and digits in its head, which carries enough entropy, and no PEM body line. */
function looksRandom(text: string, i: number, j: number): boolean {
  const head = Math.min(j, i + ENTROPY_WINDOW);
  let upper = false;
  let lower = false;
  let digit = false;
  for (let k = i; k < head; k++) {
    const c = text.charCodeAt(k);
    if (c >= 65 && c <= 90) upper = true;
    else if (c >= 97 && c <= 122) lower = true;
    else if (c >= 48 && c <= 57) digit = true;
  }
  return upper && lower && digit && !pemBodyLine(text, i, j) && entropy(text, i, head) >= ENTROPY_THRESHOLD;
}

function pem(text: string, out: Match[]): void {
  if (text.indexOf('-----BEGIN ') < 0) return;
  eachMatch(PEM_BEGIN, text, (m) => {
    const rest = text.slice(m.index + m[0].length);
    const end = PEM_END.exec(rest);
    const stop = end ? m.index + m[0].length + end.index + end[0].length : text.length;
    PEM_BEGIN.lastIndex = stop;
    return { start: m.index, end: stop, category: 'private_key', severity: SECRET_SEVERITY.private_key, ...(end ? {} : { until: PEM_END }) };
  }, out);
}

/**
 * The named tokens, found in one pass: a trie of every rule's literal prefixes finds the places a token can
 * start, and only there does each rule whose prefix is there try its pattern (sticky, so it reads nothing else).
 */
function tokenFinder(rules: readonly TokenRule[]): (text: string, out: Match[]) => void {
  if (!rules.length) return () => {};
  const sticky = rules.map((r) => ({ r, re: new RegExp(r.re.source, 'y') }));
  const needles = [...new Set(rules.flatMap((r) => r.needles))];
  const starts = new RegExp(trieSource(needles), 'g');
  // The trie matches the longest needle at a place: every rule whose needle that one starts with may apply.
  const at = new Map(needles.map((n) => [n, sticky.filter(({ r }) => r.needles.some((m) => n.startsWith(m)))]));
  return (text, out) => {
    starts.lastIndex = 0;
    for (let h = starts.exec(text); h; h = starts.exec(text)) {
      let next = h.index + 1;
      for (const { r, re } of at.get(h[0])!) {
        re.lastIndex = h.index;
        const m = re.exec(text);
        if (!m) continue;
        let end = m.index + m[0].length;
        if (r.after && r.after(text.charCodeAt(end))) continue;
        if (r.tail) while (end < text.length && r.tail(text.charCodeAt(end))) end++;
        out.push({ start: m.index, end, category: r.category, severity: SECRET_SEVERITY[r.category], ...(r.tail ? { tail: r.tail } : {}) });
        next = Math.max(next, end);
      }
      starts.lastIndex = next;
    }
  };
}

const PEM_SPAN = 40;

export function secretsDetector(categories: readonly SecretCategory[] = SECRET_CATEGORIES): Detector {
  const cats = [...new Set(categories)].sort();
  const rules = RULES.filter((r) => cats.includes(r.category));
  const withPem = cats.includes('private_key');
  const withEntropy = cats.includes('high_entropy_token');
  const tokens = tokenFinder(rules);
  // A run's PEM-body-line exception looks 12 characters past a run of up to 64.
  const spans = [...rules.map((r) => r.span), withPem ? PEM_SPAN : 0, withEntropy ? 64 + 12 : 0];
  return {
    type: 'secrets',
    key: `secrets:${cats.join(',')}`,
    maxSpan: Math.max(...spans),
    find(text) {
      const out: Match[] = [];
      if (withPem) pem(text, out);
      tokens(text, out);
      if (withEntropy) {
        // A run already matched as a named token (or inside a key block) keeps its name.
        const runs: Match[] = [];
        highEntropy(text, runs);
        for (const r of runs) if (!out.some((m) => m.start < r.end && r.start < m.end)) out.push(r);
      }
      return ordered(out);
    },
  };
}
