import { describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { checkConditions, etag, parseConditions } from './conditions.ts';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof ServiceError) return { status: e.status, type: e.type, ...e.extra };
    throw e;
  }
  throw new Error('expected a refusal');
};

describe('state write conditions', () => {
  it('reads If-Match as the ETag gives it, bare, or *; If-None-Match: * on writes', () => {
    expect(etag(7)).toBe('"7"');
    expect(parseConditions({}, true)).toEqual({});
    expect(parseConditions({ 'if-match': '"7"' }, true)).toEqual({ ifMatch: 7 });
    expect(parseConditions({ 'if-match': ' 12 ' }, false)).toEqual({ ifMatch: 12 });
    expect(parseConditions({ 'if-match': '*' }, false)).toEqual({ ifMatch: '*' });
    expect(parseConditions({ 'if-none-match': '*' }, true)).toEqual({ ifNoneMatch: true });
  });

  it('refuses malformed headers with a 400 naming the header', () => {
    for (const v of ['', 'abc', 'W/"3"', '"3", "4"', '0', '-1', '1.5', '"3', '1234567890123456']) {
      expect(refusal(() => parseConditions({ 'if-match': v }, true)), v).toMatchObject({ status: 400, type: 'invalid_request', param: 'if-match' });
    }
    expect(refusal(() => parseConditions({ 'if-none-match': '"3"' }, true))).toMatchObject({ status: 400, param: 'if-none-match' });
    expect(refusal(() => parseConditions({ 'if-none-match': '*' }, false))).toMatchObject({ status: 400, param: 'if-none-match' });
    expect(refusal(() => parseConditions({ 'if-match': '1', 'if-none-match': '*' }, true))).toMatchObject({ status: 400, param: 'if-none-match' });
  });

  it('answers 412 naming the current version when a condition fails', () => {
    checkConditions({}, undefined);
    checkConditions({}, 3);
    checkConditions({ ifMatch: 3 }, 3);
    checkConditions({ ifMatch: '*' }, 3);
    checkConditions({ ifNoneMatch: true }, undefined);
    expect(refusal(() => checkConditions({ ifMatch: 2 }, 3))).toMatchObject({ status: 412, type: 'precondition_failed', param: 'if-match', current_version: 3 });
    expect(refusal(() => checkConditions({ ifMatch: 2 }, undefined))).toMatchObject({ status: 412, current_version: null });
    expect(refusal(() => checkConditions({ ifMatch: '*' }, undefined))).toMatchObject({ status: 412, current_version: null });
    expect(refusal(() => checkConditions({ ifNoneMatch: true }, 1))).toMatchObject({ status: 412, param: 'if-none-match', current_version: 1 });
  });
});
