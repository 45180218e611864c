import { describe, expect, it } from 'vitest';
import { cardIssuer, ibanRemainder, luhnValid, piiDetector } from './pii.ts';

const found = (text: string, cats?: Parameters<typeof piiDetector>[0]) => piiDetector(cats).find(text).map((m) => [m.category, text.slice(m.start, m.end)]);

describe('pii detector', () => {
  it('checks card numbers by Luhn and issuer prefix and length', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(cardIssuer('378282246310005')).toBe('amex');
    expect(cardIssuer('5555555555554444')).toBe('mastercard');
    expect(cardIssuer('9111111111111111')).toBeNull();
    expect(found('pay with 4111 1111 1111 1111 today')).toEqual([['payment_card', '4111 1111 1111 1111']]);
    expect(found('amex 3782-822463-10005')).toEqual([['payment_card', '3782-822463-10005']]);
    expect(found('bad 4111 1111 1111 1112, mixed 4111-1111 1111 1111, longer 4111 1111 1111 1111 2222')).toEqual([]);
  });

  it('checks IBANs by country length and mod-97', () => {
    expect(ibanRemainder('DE89370400440532013000')).toBe(1);
    expect(found('IBAN DE89 3704 0044 0532 0130 00, GB82WEST12345698765432.')).toEqual([
      ['iban', 'DE89 3704 0044 0532 0130 00'],
      ['iban', 'GB82WEST12345698765432'],
    ]);
    expect(found('DE88 3704 0044 0532 0130 00 and DE89 3704 0044 0532 0130 0')).toEqual([]);
  });

  it('finds emails, phones, national ids and IP addresses, not look-alikes', () => {
    expect(found('write to jane.doe@mail.example.org or icon@2x.png or @handle')).toEqual([['email', 'jane.doe@mail.example.org']]);
    expect(found('call +1 415 555 2671 or (212) 555-0147, not 123-456-7890 or 2024-01-15')).toEqual([
      ['phone', '+1 415 555 2671'],
      ['phone', '(212) 555-0147'],
    ]);
    expect(found('SSN 536-22-1234, never 666-22-1234, 000-12-3456 or 536-00-1234; NI QQ 12 34 56 C is not, AB123456C is')).toEqual([
      ['national_id', '536-22-1234'],
      ['national_id', 'AB123456C'],
    ]);
    expect(found('hosts 10.0.0.1, fe80::1ff:fe23:4567:890a; not 10.0.19045.3693, 12:30:45 or 999.1.1.1')).toEqual([
      ['ip_address', '10.0.0.1'],
      ['ip_address', 'fe80::1ff:fe23:4567:890a'],
    ]);
  });

  it('scans only the categories asked for', () => {
    expect(found('a@b.example and 10.0.0.1', ['ip_address'])).toEqual([['ip_address', '10.0.0.1']]);
  });
});
