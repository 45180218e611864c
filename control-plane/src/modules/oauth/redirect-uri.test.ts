import { describe, expect, it } from 'vitest';
import { redirectUriMatches, redirectUriProblem } from './redirect-uri.ts';

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

describe('matching a requested redirect URI against the registered ones', () => {
  const registered = ['https://app.example/callback', 'http://127.0.0.1:53123/callback', 'http://[::1]/cb?x=1', 'http://localhost:3000/oauth/callback'];
  it.each([
    'https://app.example/callback',
    'http://127.0.0.1:53123/callback',
    'http://127.0.0.1:61000/callback', // loopback: any port at request time (RFC 8252 section 7.3)
    'http://127.0.0.1/callback',
    'http://[::1]:40000/cb?x=1',
    'http://localhost:9999/oauth/callback',
  ])('matches %s', (u) => expect(redirectUriMatches(registered, u)).toBe(true));
  it.each([
    'https://app.example:8443/callback', // https: exact only
    'https://app.example/callback/',
    'http://127.0.0.1:61000/other', // another path
    'http://localhost:53123/callback', // another loopback host
    'http://[::1]:40000/cb?x=2', // another query
    'http://127.0.0.1:61000/callback#f',
    'http://user@127.0.0.1:61000/callback',
  ])('does not match %s', (u) => expect(redirectUriMatches(registered, u)).toBe(false));
});
