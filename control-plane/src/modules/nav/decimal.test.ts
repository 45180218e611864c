import { describe, expect, it } from 'vitest';
import { add, cmp, decToString, div, mul, normalize, parseDec, round, sub, sum } from './decimal.ts';

const d = parseDec;
const s = decToString;

describe('exact decimals', () => {
  it('parses and prints in the shortest form', () => {
    expect(normalize('100.50')).toBe('100.5');
    expect(normalize('007')).toBe('7');
    expect(normalize('-0.000')).toBe('0');
    expect(normalize('0.000001')).toBe('0.000001');
    expect(normalize('-12.340')).toBe('-12.34');
    expect(() => parseDec('1e5')).toThrow();
    expect(() => parseDec('1.')).toThrow();
    expect(() => parseDec('.5')).toThrow();
  });

  it('adds, subtracts and multiplies exactly where floats do not', () => {
    expect(s(add(d('0.1'), d('0.2')))).toBe('0.3');
    expect(s(sub(d('1'), d('0.9')))).toBe('0.1');
    expect(s(mul(d('123456789012345678901234567890'), d('0.000000000000000001')))).toBe('123456789012.34567890123456789');
    expect(s(sum([d('1.25'), d('-0.25'), d('3')]))).toBe('4');
    expect(cmp(d('2.50'), d('2.5'))).toBe(0);
    expect(cmp(d('-1'), d('0'))).toBe(-1);
  });

  it('divides with half-to-even rounding at the stated scale', () => {
    expect(s(div(d('10'), d('3'), 4))).toBe('3.3333');
    expect(s(div(d('2'), d('3'), 4))).toBe('0.6667');
    expect(s(div(d('1'), d('8'), 2))).toBe('0.12'); // 0.125: ties to even
    expect(s(div(d('3'), d('8'), 2))).toBe('0.38'); // 0.375: ties to even
    expect(s(div(d('-1'), d('8'), 2))).toBe('-0.12');
    expect(s(div(d('5'), d('-2'), 0))).toBe('-2');
    expect(s(round(d('2.345'), 2))).toBe('2.34');
    expect(s(round(d('2.355'), 2))).toBe('2.36');
    expect(() => div(d('1'), d('0'), 2)).toThrow();
  });
});
