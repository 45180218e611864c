import { isIPv6 } from 'node:net';
import { eachMatch, isAlnum, isDigit, ordered, type Detector, type Match, type Severity } from './types.ts';

/**
 * Personal data (docs/guardrails.md lists each format and where it comes from):
 * - email: RFC 5321 mailbox shape, local part at most 64 characters, domain at most 63 (dot-separated
 *   labels, a 2-24 letter TLD); an image name such as `icon@2x.png` is not one, nor the user information
 *   of a URL (`https://user:token@host`);
 * - phone: an international number (`+`, country code, 8 to 15 digits in all, spaces, dots, dashes or a
 *   parenthesised group between), or a North American number (NANP: area and exchange codes start 2-9);
 * - payment_card: 13 to 19 digits, optionally grouped by single spaces or dashes, passing the Luhn check and
 *   starting with an issuer prefix at a length that issuer uses (ISO/IEC 7812: Visa, Mastercard, Amex,
 *   Discover, JCB, Diners, UnionPay, Maestro); part of a longer number (digits joined by a space or dash
 *   on either side) is not one;
 * - iban: ISO 13616: a country code, two check digits and the country's BBAN length (printed with or
 *   without spaces), valid when the mod-97 remainder is 1;
 * - national_id: a US Social Security number with dashes or spaces (area 000, 666 and 900-999, group 00 and
 *   serial 0000 are never issued and are not matched), and a UK National Insurance number (HMRC's prefix
 *   letters; BG, GB, KN, NK, NT, TN and ZZ are not allocated);
 * - ip_address: an IPv4 dotted quad (octets 0-255), an IPv6 address (as `net.isIPv6` accepts it).
 */
export const PII_CATEGORIES = ['email', 'phone', 'payment_card', 'iban', 'national_id', 'ip_address'] as const;
export type PiiCategory = (typeof PII_CATEGORIES)[number];

export const PII_SEVERITY: Record<PiiCategory, Severity> = {
  email: 'medium',
  phone: 'medium',
  payment_card: 'high',
  iban: 'high',
  national_id: 'high',
  ip_address: 'low',
};

// --- email --------------------------------------------------------------------------------------------------
const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?@(?=[A-Za-z0-9.-]{4,63}(?![A-Za-z0-9.-]))(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])/y;
const LOCAL = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-') LOCAL[c.charCodeAt(0)] = 1;
const IMAGE_TLD = new Set(['png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'ico', 'bmp', 'tif', 'tiff', 'avif', 'heic']);

/**
 * Each `@` anchors a search: back over the local-part characters before it (at most 64) to where a mailbox
 * could start, then EMAIL (sticky) from there; the text between two `@` is never searched.
 */
function emails(text: string, out: Match[]): void {
  let at = text.indexOf('@');
  let from = 0;
  while (at >= 0) {
    let s = at;
    while (s > from && at - s <= 64 && LOCAL[text.charCodeAt(s - 1)] === 1) s--;
    let m: RegExpExecArray | null = null;
    for (; s < at && !m; s++) {
      EMAIL.lastIndex = s;
      m = EMAIL.exec(text);
    }
    const kept = m ? email(text, m) : null;
    if (kept) out.push(kept);
    from = m ? m.index + m[0].length : at + 1;
    at = text.indexOf('@', Math.max(at + 1, from));
  }
}

function email(text: string, m: RegExpExecArray): Match | null {
  {
    const s = m[0];
    const tld = s.slice(s.lastIndexOf('.') + 1).toLowerCase();
    if (IMAGE_TLD.has(tld)) return null; // icon@2x.png
    // The user information of a URL (https://user:token@host/...), not a mailbox; `mailto:` is one.
    const before = text[m.index - 1];
    if ((before === ':' || before === '/') && !text.slice(Math.max(0, m.index - 7), m.index).toLowerCase().endsWith('mailto:')) return null;
    return { start: m.index, end: m.index + s.length, category: 'email', severity: PII_SEVERITY.email };
  }
}

// --- phone --------------------------------------------------------------------------------------------------
const INTL_PHONE = /(?<![\w+])\+[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){2,6}(?![\w])/g;
const NANP_PHONE = /(?<![\w+.-])(?:\+?1[ .-]?)?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[ .-])[2-9]\d{2}[ .-]\d{4}(?![\w]|[.-]\d)/g;

function phones(text: string, out: Match[]): void {
  if (text.indexOf('+') >= 0) {
    eachMatch(INTL_PHONE, text, (m) => {
      const digits = m[0].replace(/\D/g, '').length;
      if (digits < 8 || digits > 15) return null;
      if ((m[0].match(/\(/g)?.length ?? 0) !== (m[0].match(/\)/g)?.length ?? 0)) return null;
      return { start: m.index, end: m.index + m[0].length, category: 'phone', severity: PII_SEVERITY.phone };
    }, out);
  }
  eachMatch(NANP_PHONE, text, (m) => ({ start: m.index, end: m.index + m[0].length, category: 'phone', severity: PII_SEVERITY.phone }), out);
}

// --- payment cards ------------------------------------------------------------------------------------------
const CARD = /(?<![\d])\d(?:[ -]?\d){12,18}(?!\d)/g;

/** The Luhn (mod 10) check of a digit string. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** Whether an issuer uses this prefix at this length (ISO/IEC 7812 issuer identification numbers). */
export function cardIssuer(d: string): string | null {
  const n = d.length;
  const p2 = Number(d.slice(0, 2));
  const p3 = Number(d.slice(0, 3));
  const p4 = Number(d.slice(0, 4));
  const p6 = Number(d.slice(0, 6));
  if (d[0] === '4' && (n === 13 || n === 16 || n === 19)) return 'visa';
  if (((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) && n === 16) return 'mastercard';
  if ((p2 === 34 || p2 === 37) && n === 15) return 'amex';
  if ((p4 === 6011 || p2 === 65 || (p3 >= 644 && p3 <= 649) || (p6 >= 622126 && p6 <= 622925)) && n >= 16 && n <= 19) return 'discover';
  if (p4 >= 3528 && p4 <= 3589 && n >= 16 && n <= 19) return 'jcb';
  if (((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) && n >= 14 && n <= 19) return 'diners';
  if (p2 === 62 && n >= 16 && n <= 19) return 'unionpay';
  if ((p2 === 50 || (p2 >= 56 && p2 <= 69)) && n >= 12 && n <= 19) return 'maestro';
  return null;
}

function cards(text: string, out: Match[]): void {
  eachMatch(CARD, text, (m) => {
    const s = m[0];
    // The digits, and the separator between groups: one kind only (mixed: not one printed number).
    let digits = '';
    let sep = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 48 && c <= 57) digits += s[i];
      else if (sep === 0) sep = c;
      else if (c !== sep) return null;
    }
    const end = m.index + s.length;
    // Part of a longer grouped number (a tracking or account number, a token's digits): a space or dash and a
    // digit on either side.
    const joined = (c: string | undefined) => c === ' ' || c === '-';
    if ((joined(text[end]) && isDigit(text.charCodeAt(end + 1))) || (joined(text[m.index - 1]) && isDigit(text.charCodeAt(m.index - 2)))) return null;
    if (!luhnValid(digits) || !cardIssuer(digits)) return null;
    return { start: m.index, end, category: 'payment_card', severity: PII_SEVERITY.payment_card };
  }, out);
}

// --- IBAN ---------------------------------------------------------------------------------------------------
/** ISO 13616 IBAN lengths by country (the SWIFT IBAN registry). */
export const IBAN_LENGTHS: Record<string, number> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BR: 29, BY: 28, CH: 21, CR: 22, CY: 28, CZ: 24, DE: 22, DK: 18, DO: 28,
  EE: 20, EG: 29, ES: 24, FI: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HR: 21, HU: 28, IE: 22, IL: 23, IQ: 23, IS: 26,
  IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20, LV: 21, MC: 27, MD: 24, ME: 22, MK: 19, MR: 27, MT: 31, MU: 30,
  NL: 18, NO: 15, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, SA: 24, SC: 31, SE: 24, SI: 19, SK: 24, SM: 27, ST: 25, SV: 28,
  TL: 23, TN: 24, TR: 26, UA: 29, VA: 22, VG: 24, XK: 20,
};

/** The ISO 7064 mod-97 remainder of an IBAN (country code and check digits moved to the end, letters as 10-35). */
export function ibanRemainder(iban: string): number {
  const s = iban.slice(4) + iban.slice(0, 4);
  let r = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) r = (r * 10 + (c - 48)) % 97;
    else r = (r * 100 + (c - 55)) % 97; // 'A' (65) is 10
  }
  return r;
}

const IBAN_START = /(?<![A-Za-z0-9])([A-Z]{2})(\d{2})/g;

function ibans(text: string, out: Match[]): void {
  eachMatch(IBAN_START, text, (m) => {
    const len = IBAN_LENGTHS[m[1]!];
    if (!len) return null;
    // The BBAN: letters and digits, with at most one space between any two (printed in groups of four).
    let chars = m[1]! + m[2]!;
    let i = m.index + 4;
    while (chars.length < len && i < text.length) {
      let c = text.charCodeAt(i);
      if (c === 32) {
        c = text.charCodeAt(i + 1);
        if (!isAlnum(c)) break;
        i++;
      }
      if (!isAlnum(c)) break;
      chars += String.fromCharCode(c >= 97 ? c - 32 : c);
      i++;
    }
    if (chars.length !== len || isAlnum(text.charCodeAt(i))) return null;
    if (ibanRemainder(chars) !== 1) return null;
    return { start: m.index, end: i, category: 'iban', severity: PII_SEVERITY.iban };
  }, out);
}

// --- national ids -------------------------------------------------------------------------------------------
const SSN = /(?<![\d-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\d]|-\d)/g;
const NINO = /(?<![A-Za-z0-9])([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]) ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])/g;
const NINO_UNALLOCATED = new Set(['BG', 'GB', 'KN', 'NK', 'NT', 'TN', 'ZZ']);

function nationalIds(text: string, out: Match[]): void {
  eachMatch(SSN, text, (m) => {
    const area = Number(m[1]);
    if (area === 0 || area === 666 || area >= 900 || m[3] === '00' || m[4] === '0000') return null;
    return { start: m.index, end: m.index + m[0].length, category: 'national_id', severity: PII_SEVERITY.national_id };
  }, out);
  eachMatch(NINO, text, (m) => (NINO_UNALLOCATED.has(m[1]!) ? null : { start: m.index, end: m.index + m[0].length, category: 'national_id', severity: PII_SEVERITY.national_id }), out);
}

// --- IP addresses -------------------------------------------------------------------------------------------
const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`(?<![\\d.])(?:${OCTET}\\.){3}${OCTET}(?!\\d|\\.\\d)`, 'g');
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])/y;
/** Two colons with at most four hex digits between them: no IPv6 address without one. */
const IPV6_HINT = /:[0-9A-Fa-f]{0,4}:/g;
const isHexOrColon = (c: number) => (c >= 48 && c <= 58) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);

const colons = (s: string) => {
  let n = 0;
  for (let i = s.indexOf(':'); i >= 0; i = s.indexOf(':', i + 1)) n++;
  return n;
};

function ips(text: string, out: Match[]): void {
  if (text.indexOf('.') >= 0) eachMatch(IPV4, text, (m) => ({ start: m.index, end: m.index + m[0].length, category: 'ip_address', severity: PII_SEVERITY.ip_address }), out);
  // Each pair of close colons anchors a search: back over hex digits and colons to where an address could
  // start, then IPV6 (sticky) from there.
  IPV6_HINT.lastIndex = 0;
  let from = 0;
  for (let h = IPV6_HINT.exec(text); h; h = IPV6_HINT.exec(text)) {
    let s = h.index;
    while (s > from && h.index - s < 40 && isHexOrColon(text.charCodeAt(s - 1))) s--;
    let m: RegExpExecArray | null = null;
    for (; s <= h.index && !m; s++) {
      IPV6.lastIndex = s;
      m = IPV6.exec(text);
    }
    if (!m) continue;
    const a = m[0];
    from = m.index + a.length;
    IPV6_HINT.lastIndex = Math.max(IPV6_HINT.lastIndex, from);
    // An address is eight groups (seven colons) or holds `::`: a time such as 10:30:00 never reaches isIPv6.
    if (a.length >= 3 && (a.includes('::') || colons(a) === 7) && /[0-9A-Fa-f]/.test(a) && isIPv6(a)) out.push({ start: m.index, end: from, category: 'ip_address', severity: PII_SEVERITY.ip_address });
  }
}

const FINDERS: Record<PiiCategory, (text: string, out: Match[]) => void> = {
  email: emails,
  phone: phones,
  payment_card: cards,
  iban: ibans,
  national_id: nationalIds,
  ip_address: ips,
};

/** The longest span each category's patterns can match (the stream hold-back is the largest enabled one). */
const MAX_SPAN: Record<PiiCategory, number> = { email: 129, phone: 40, payment_card: 25, iban: 42, national_id: 13, ip_address: 45 };

export function piiDetector(categories: readonly PiiCategory[] = PII_CATEGORIES): Detector {
  const cats = [...new Set(categories)].sort();
  const finders = cats.map((c) => FINDERS[c]);
  return {
    type: 'pii',
    key: `pii:${cats.join(',')}`,
    maxSpan: Math.max(...cats.map((c) => MAX_SPAN[c])),
    find(text) {
      const out: Match[] = [];
      for (const f of finders) f(text, out);
      return ordered(out);
    },
  };
}
