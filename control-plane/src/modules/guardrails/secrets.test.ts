import { describe, expect, it } from 'vitest';
import { ENTROPY_THRESHOLD, entropy, secretsDetector } from './secrets.ts';

const found = (text: string) => secretsDetector().find(text).map((m) => [m.category, text.slice(m.start, m.end)]);

describe('secrets detector', () => {
  it('finds each key format by its prefix and length', () => {
    const gh = `ghp_${'Ab3'.repeat(12)}`;
    const pat = `github_pat_${'x1Y_'.repeat(20)}ab`;
    expect(found(`aws AKIAIOSFODNN7EXAMPLE gh ${gh} pat ${pat}`)).toEqual([
      ['aws_access_key', 'AKIAIOSFODNN7EXAMPLE'],
      ['github_token', gh],
      ['github_token', pat],
    ]);
    expect(found('slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx ok')).toEqual([['slack_token', 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx']]);
    expect(found(`stripe sk_live_${'4eC39HqLyjWDarjtT1zdp7dc'}x`)).toEqual([['stripe_key', 'sk_live_4eC39HqLyjWDarjtT1zdp7dcx']]);
    expect(found('openai sk-proj-AbCdEf0123456789GhIjKl_mnOP and ours sk-svc_0123456789abcdefABCD')).toEqual([
      ['openai_api_key', 'sk-proj-AbCdEf0123456789GhIjKl_mnOP'],
      ['svc_api_key', 'sk-svc_0123456789abcdefABCD'],
    ]);
    expect(found('google AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY')).toEqual([['google_api_key', 'AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY']]);
    const evm = `0x${'4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'}`;
    expect(found(`key ${evm}; address 0x52908400098527886E0F7030069857D2E4169EE7`)).toEqual([['evm_private_key', evm]]);
  });

  it('takes a private key block through its END line, or to the end of the text', () => {
    const block = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----';
    expect(found(`a ${block} b`)).toEqual([['private_key', block]]);
    expect(found('cut -----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN')).toEqual([['private_key', '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN']]);
    expect(found('-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----')).toEqual([]);
  });

  it('finds JWTs and random tokens, never hex digests or identifiers', () => {
    const jwt = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
    expect(found(`Bearer ${jwt}`)).toEqual([['jwt', jwt]]);
    expect(found('token Zx9Kq2Lm8Np4Rt6Vw1Yb3Cd5Fg7Hj0Ks2Mn4Pq6S')).toEqual([['high_entropy_token', 'Zx9Kq2Lm8Np4Rt6Vw1Yb3Cd5Fg7Hj0Ks2Mn4Pq6S']]);
    expect(found('sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 uuid 123e4567-e89b-12d3-a456-426614174000')).toEqual([]);
    expect(found('getUserAccountSettingsForCurrentSessionHandler2')).toEqual([]);
    expect(entropy('0123456789abcdef0123456789abcdef0123456789')).toBeLessThan(ENTROPY_THRESHOLD);
  });
});
