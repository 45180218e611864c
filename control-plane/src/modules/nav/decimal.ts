/**
 * Exact decimal arithmetic on bigints for money and quantities: a value is `n / 10^scale`. Inputs are decimal
 * strings (never floats); sums and products are exact; a quotient is rounded half-to-even at a stated scale.
 */
export interface Dec {
  n: bigint;
  scale: number;
}

export const MAX_INT_DIGITS = 36;
export const MAX_FRACTION_DIGITS = 18;
export const DECIMAL_PATTERN = new RegExp(`^-?\\d{1,${MAX_INT_DIGITS}}(\\.\\d{1,${MAX_FRACTION_DIGITS}})?$`);
export const UNSIGNED_PATTERN = new RegExp(`^\\d{1,${MAX_INT_DIGITS}}(\\.\\d{1,${MAX_FRACTION_DIGITS}})?$`);
export const INTEGER_PATTERN = /^\d{1,78}$/;

export function parseDec(s: string): Dec {
  if (!DECIMAL_PATTERN.test(s)) throw new Error(`not a decimal: ${s}`);
  const neg = s.startsWith('-');
  const [i, f = ''] = (neg ? s.slice(1) : s).split('.');
  const n = BigInt(i! + f);
  return { n: neg ? -n : n, scale: f.length };
}

const pow10 = (k: number) => 10n ** BigInt(k);

function align(a: Dec, b: Dec): [bigint, bigint, number] {
  const scale = Math.max(a.scale, b.scale);
  return [a.n * pow10(scale - a.scale), b.n * pow10(scale - b.scale), scale];
}

export const ZERO: Dec = { n: 0n, scale: 0 };
export const fromBigInt = (n: bigint): Dec => ({ n, scale: 0 });

export function add(a: Dec, b: Dec): Dec {
  const [x, y, scale] = align(a, b);
  return { n: x + y, scale };
}

export function sub(a: Dec, b: Dec): Dec {
  const [x, y, scale] = align(a, b);
  return { n: x - y, scale };
}

export function mul(a: Dec, b: Dec): Dec {
  return { n: a.n * b.n, scale: a.scale + b.scale };
}

export function cmp(a: Dec, b: Dec): -1 | 0 | 1 {
  const [x, y] = align(a, b);
  return x < y ? -1 : x > y ? 1 : 0;
}

export const sum = (list: Dec[]) => list.reduce(add, ZERO);

/** a / b rounded half-to-even to `scale` fraction digits; b must not be zero. */
export function div(a: Dec, b: Dec, scale: number): Dec {
  if (b.n === 0n) throw new Error('division by zero');
  // a/b = (a.n / 10^as) / (b.n / 10^bs) = a.n * 10^(bs + scale - as) / b.n, in units of 10^-scale.
  const shift = b.scale + scale - a.scale;
  let num = a.n;
  let den = b.n;
  if (shift >= 0) num *= pow10(shift);
  else den *= pow10(-shift);
  if (den < 0n) {
    num = -num;
    den = -den;
  }
  const neg = num < 0n;
  const abs = neg ? -num : num;
  let q = abs / den;
  const r = abs % den;
  const twice = r * 2n;
  if (twice > den || (twice === den && q % 2n === 1n)) q += 1n;
  return { n: neg ? -q : q, scale };
}

/** Rounds half-to-even to at most `scale` fraction digits. */
export const round = (a: Dec, scale: number): Dec => (a.scale <= scale ? a : div(a, { n: 1n, scale: 0 }, scale));

/** The shortest decimal string of the value: no trailing fraction zeros, no "-0". */
export function decToString(a: Dec): string {
  const neg = a.n < 0n;
  let digits = (neg ? -a.n : a.n).toString();
  if (a.scale > 0) digits = digits.padStart(a.scale + 1, '0');
  let int = a.scale > 0 ? digits.slice(0, -a.scale) : digits;
  let frac = a.scale > 0 ? digits.slice(-a.scale) : '';
  frac = frac.replace(/0+$/, '');
  int = int.replace(/^0+(?=\d)/, '');
  const s = frac ? `${int}.${frac}` : int;
  return neg && s !== '0' ? `-${s}` : s;
}

/** A decimal string in its shortest form ("100.50" → "100.5"). */
export const normalize = (s: string) => decToString(parseDec(s));

export const isNegative = (a: Dec) => a.n < 0n;
export const isZero = (a: Dec) => a.n === 0n;
