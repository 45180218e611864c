import { describe, expect, it } from 'vitest';
import { OAuthError, parseParams, singleParams, splitScope } from './params.ts';

const form = 'application/x-www-form-urlencoded';
const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(OAuthError);
    return (e as OAuthError).body();
  }
  throw new Error('expected a refusal');
};

describe('token request parameters', () => {
  it('reads form-encoded bodies, with a charset or without', () => {
    expect(parseParams(form, Buffer.from('grant_type=authorization_code&code=a%2Bb&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb'))).toEqual({
      grant_type: 'authorization_code',
      code: 'a+b',
      redirect_uri: 'http://127.0.0.1/cb',
    });
    expect(parseParams(`${form};charset=UTF-8`, Buffer.from('a=1'))).toEqual({ a: '1' });
  });

  it('reads JSON objects of strings', () => {
    expect(parseParams('application/json', Buffer.from('{"grant_type":"refresh_token","refresh_token":"x"}'))).toEqual({ grant_type: 'refresh_token', refresh_token: 'x' });
    expect(parseParams('application/json', Buffer.alloc(0))).toEqual({});
  });

  it('refuses repeated parameters, non-string JSON values, bad JSON and other types as invalid_request', () => {
    expect(refusal(() => parseParams(form, Buffer.from('code=a&code=b')))).toEqual({ error: 'invalid_request', error_description: 'Parameter code is repeated' });
    expect(refusal(() => parseParams('application/json', Buffer.from('{"scope":["a"]}'))).error).toBe('invalid_request');
    expect(refusal(() => parseParams('application/json', Buffer.from('[1]'))).error).toBe('invalid_request');
    expect(refusal(() => parseParams('application/json', Buffer.from('{'))).error).toBe('invalid_request');
    expect(refusal(() => parseParams('text/plain', Buffer.from('a=1'))).error).toBe('invalid_request');
    expect(refusal(() => parseParams(form, Buffer.from(`a=${'x'.repeat(5000)}`))).error_description).toMatch(/longer than/);
  });

  it('keeps inherited names as ordinary parameters', () => {
    const p = parseParams(form, Buffer.from('constructor=1&__proto__=2'));
    expect(p.constructor).toBe('1');
    expect(Object.keys(p).sort()).toEqual(['__proto__', 'constructor']);
  });

  it('refuses a repeated query parameter (authorize)', () => {
    expect(singleParams({ a: '1', b: '2' })).toEqual({ a: '1', b: '2' });
    expect(refusal(() => singleParams({ scope: ['a', 'b'] })).error_description).toBe('Parameter scope is repeated');
  });

  it('splits scopes on spaces, without duplicates', () => {
    expect(splitScope('billing  proofs billing')).toEqual(['billing', 'proofs']);
    expect(splitScope(undefined)).toEqual([]);
  });
});
