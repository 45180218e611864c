import { describe, expect, it } from 'vitest';
import { redirectUriProblem } from './redirect-uri.ts';

describe('redirect URI rules', () => {
  it.each([
    'https://app.example/callback',
    'https://app.example:8443/cb?x=1',
    'http://127.0.0.1/callback',
    'http://127.0.0.1:53123/callback',
    'http://localhost:3000/oauth/callback',
    'http://[::1]:8080/cb',
  ])('accepts %s', (u) => expect(redirectUriProblem(u)).toBeNull());

  it.each([
    ['http://app.example/callback', /loopback/],
    ['http://192.168.1.10/cb', /loopback/],
    ['http://127.0.0.1.nip.io/cb', /loopback/],
    ['myapp://callback', /scheme is not allowed/],
    ['javascript:alert(1)', /scheme is not allowed/],
    ['https://app.example/cb#frag', /fragment/],
    ['https://user:pw@app.example/cb', /credentials/],
    ['/relative/callback', /absolute/],
    [`https://app.example/${'a'.repeat(2000)}`, /longer than/],
  ])('refuses %s', (u, why) => expect(redirectUriProblem(u)).toMatch(why));
});
