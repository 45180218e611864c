import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.ts';
import { parseOrigin, passkeysConfig, rpIdProblem } from './passkeys.ts';

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe('passkey settings', () => {
  it('are off unless both are set (blank counts as unset)', () => {
    expect(loadConfig({}).passkeys).toBeNull();
    expect(loadConfig({ SVC_PASSKEY_RP_ID: ' ', SVC_PASSKEY_ORIGIN: '' }).passkeys).toBeNull();
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com' })).toEqual(['SVC_PASSKEY_ORIGIN: must be set with SVC_PASSKEY_RP_ID (both enable passkeys)']);
    expect(problems({ SVC_PASSKEY_ORIGIN: 'https://example.com' })).toEqual(['SVC_PASSKEY_RP_ID: must be set with SVC_PASSKEY_ORIGIN (both enable passkeys)']);
  });

  it('take a domain and the origins under it, normalised to bare origins', () => {
    expect(loadConfig({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'https://example.com/, https://app.example.com:8443,https://example.com' }).passkeys).toEqual({
      rpId: 'example.com',
      origins: ['https://example.com', 'https://app.example.com:8443'],
      rpName: 'svc gateway',
    });
    expect(loadConfig({ SVC_PASSKEY_RP_ID: 'localhost', SVC_PASSKEY_ORIGIN: 'http://localhost:8080' }).passkeys?.origins).toEqual(['http://localhost:8080']);
  });

  it('refuse, naming the variable, what browsers would refuse', () => {
    expect(problems({ SVC_PASSKEY_RP_ID: 'https://example.com', SVC_PASSKEY_ORIGIN: 'https://example.com' })[0]).toMatch(/^SVC_PASSKEY_RP_ID: must be a domain name/);
    expect(problems({ SVC_PASSKEY_RP_ID: '127.0.0.1', SVC_PASSKEY_ORIGIN: 'http://127.0.0.1:8080' })[0]).toMatch(/^SVC_PASSKEY_RP_ID: must be a domain name, not an IP address/);
    expect(problems({ SVC_PASSKEY_RP_ID: 'Example.com', SVC_PASSKEY_ORIGIN: 'https://example.com' })).toEqual(['SVC_PASSKEY_RP_ID: must be lowercase']);
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'http://example.com' })[0]).toMatch(/^SVC_PASSKEY_ORIGIN: http:\/\/example.com: must be https/);
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'https://example.org' })[0]).toMatch(/must be SVC_PASSKEY_RP_ID \(example.com\) or a subdomain of it/);
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'https://notexample.com' })[0]).toMatch(/or a subdomain of it/);
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'https://example.com/login' })[0]).toMatch(/must be a bare origin/);
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'example.com' })[0]).toMatch(/not a URL/);
    // Every bad origin is named at once.
    expect(problems({ SVC_PASSKEY_RP_ID: 'example.com', SVC_PASSKEY_ORIGIN: 'ftp://example.com,https://a.example.com?x=1' })).toHaveLength(2);
  });

  it('pure checks', () => {
    expect(rpIdProblem('a-b.example.com')).toBeNull();
    expect(rpIdProblem('-a.example.com')).not.toBeNull();
    expect(rpIdProblem('example.com:443')).not.toBeNull();
    expect(parseOrigin('http://app.localhost:3000', 'localhost')).toEqual({ origin: 'http://app.localhost:3000' });
    expect(passkeysConfig({}).config).toBeNull();
  });
});
