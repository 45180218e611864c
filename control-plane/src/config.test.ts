import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

const KEY_HEX = 'aa'.repeat(32);

/** Asserts loadConfig(env) throws a ConfigError that names `variable`, and returns it. */
function expectConfigError(env: Record<string, string | undefined>, variable: string): ConfigError {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (e) {
    caught = e;
  }
  expect(caught, `expected ${JSON.stringify(env)} to throw`).toBeInstanceOf(ConfigError);
  const err = caught as ConfigError;
  expect(err.name).toBe('ConfigError');
  expect(err.message).toContain(variable);
  expect(err.problems.some((p) => p.startsWith(`${variable}:`))).toBe(true);
  return err;
}

describe('loadConfig defaults', () => {
  it('fills every default from an empty environment', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.dataDir).toBe('./data');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.publicUrl).toBeInstanceOf(URL);
    expect(c.publicUrl.href).toBe('http://localhost:8080/');
    expect(c.sealKey).toBeUndefined();
    expect(c.signerKey).toBeUndefined();
    expect(c.preparedNonces).toBe(true);
    expect(c.adminToken).toBeUndefined();
    expect(c.metricsToken).toBeUndefined();
    expect(c.siweChainIds).toEqual([1]);
    expect(c.sessionTtlSeconds).toBe(30 * 24 * 3600);
    expect(c.keyRotationGraceSeconds).toBe(24 * 3600);
    expect(c.bodyLimitBytes).toBe(1024 * 1024);
    expect(c.leaderRetrySeconds).toBe(5);
    expect(c.healthSampleSeconds).toBe(60);
    expect(c.logLevel).toBe('info');
  });

  it('derives publicUrl from PORT when SVC_PUBLIC_URL is unset', () => {
    const c = loadConfig({ PORT: '9123' });
    expect(c.port).toBe(9123);
    expect(c.publicUrl.href).toBe('http://localhost:9123/');
    expect(c.publicUrl.host).toBe('localhost:9123');
  });

  it('SVC_PUBLIC_URL wins over the PORT-derived URL', () => {
    const c = loadConfig({ PORT: '9123', SVC_PUBLIC_URL: 'https://gw.example.com' });
    expect(c.port).toBe(9123);
    expect(c.publicUrl.origin).toBe('https://gw.example.com');
    expect(c.publicUrl.host).toBe('gw.example.com');
  });
});

describe('loadConfig parsing', () => {
  it('parses valid values of every variable', () => {
    const c = loadConfig({
      PORT: '0',
      HOST: '0.0.0.0',
      SVC_DATA_DIR: '/var/lib/svc',
      DATABASE_URL: 'postgresql://u:p@db:5432/svc',
      SVC_PUBLIC_URL: 'http://127.0.0.1:3000/',
      SVC_SEAL_KEY: KEY_HEX,
      SVC_SIGNER_KEY: `0x${'BB'.repeat(32)}`,
      SVC_PREPARED_NONCES: 'false',
      SVC_ADMIN_TOKEN: 'a'.repeat(16),
      SVC_METRICS_TOKEN: 'm'.repeat(40),
      SVC_SIWE_CHAIN_IDS: '1,8453,84532',
      SVC_SESSION_TTL_SECONDS: '60',
      SVC_KEY_ROTATION_GRACE_SECONDS: '0',
      SVC_BODY_LIMIT_BYTES: '2048',
      SVC_LEADER_RETRY_SECONDS: '2',
      SVC_HEALTH_SAMPLE_SECONDS: '15',
      SVC_LOG_LEVEL: 'debug',
    });
    expect(c).toMatchObject({
      port: 0,
      host: '0.0.0.0',
      dataDir: '/var/lib/svc',
      databaseUrl: 'postgresql://u:p@db:5432/svc',
      sealKey: `0x${KEY_HEX}`, // 0x added
      signerKey: `0x${'BB'.repeat(32)}`, // kept as given
      preparedNonces: false,
      adminToken: 'a'.repeat(16),
      metricsToken: 'm'.repeat(40),
      siweChainIds: [1, 8453, 84532],
      sessionTtlSeconds: 60,
      keyRotationGraceSeconds: 0,
      bodyLimitBytes: 2048,
      leaderRetrySeconds: 2,
      healthSampleSeconds: 15,
      logLevel: 'debug',
    });
    expect(c.publicUrl.href).toBe('http://127.0.0.1:3000/');
  });

  it('accepts postgres:// as well as postgresql://', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/db' }).databaseUrl).toBe('postgres://localhost/db');
  });

  it('accepts PORT at both ends of its range', () => {
    expect(loadConfig({ PORT: '65535' }).port).toBe(65535);
    expect(loadConfig({ PORT: '1' }).port).toBe(1);
  });
});

describe('loadConfig errors name the variable', () => {
  it.each<[string, string]>([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '65536'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', 'postgres:/missing-slash'],
    ['SVC_PUBLIC_URL', 'ftp://x'],
    ['SVC_PUBLIC_URL', 'not a url'],
    ['SVC_SIGNER_KEY', 'zz'],
    ['SVC_SIGNER_KEY', 'aa'.repeat(31)],
    ['SVC_SIGNER_KEY', `0x${'aa'.repeat(33)}`],
    ['SVC_SEAL_KEY', `${'aa'.repeat(31)}zz`],
    ['SVC_SIGNER_ROTATE_FROM', '0x1234'],
    ['SVC_SEAL_REPLACE_FROM', 'ab'.repeat(17)],
    ['SVC_ADMIN_TOKEN', 'short'],
    ['SVC_ADMIN_TOKEN', 'a'.repeat(15)],
    ['SVC_METRICS_TOKEN', 'tooshort'],
    ['SVC_SIWE_CHAIN_IDS', 'a,b'],
    ['SVC_SIWE_CHAIN_IDS', '1,'],
    ['SVC_SIWE_CHAIN_IDS', '1, 2'],
    ['SVC_SESSION_TTL_SECONDS', '59'],
    ['SVC_BODY_LIMIT_BYTES', '1023'],
    ['SVC_LEADER_RETRY_SECONDS', '0'],
    ['SVC_LOG_LEVEL', 'loud'],
  ])('%s=%s', (variable, value) => {
    const err = expectConfigError({ [variable]: value }, variable);
    expect(err.problems).toHaveLength(1);
  });

  it('reports every bad variable at once', () => {
    const err = expectConfigError({ PORT: 'abc', SVC_SIGNER_KEY: 'zz', SVC_SIWE_CHAIN_IDS: 'a,b' }, 'PORT');
    expect(err.problems).toHaveLength(3);
    expect(err.message).toContain('SVC_SIGNER_KEY');
    expect(err.message).toContain('SVC_SIWE_CHAIN_IDS');
  });

  it('does not echo secret values in the error', () => {
    const err = expectConfigError({ SVC_ADMIN_TOKEN: 'hunter2secret' }, 'SVC_ADMIN_TOKEN');
    expect(err.message).not.toContain('hunter2secret');
  });
});

describe('loadConfig empty and unrelated variables', () => {
  it('empty strings for the optional tokens and DATABASE_URL mean unset', () => {
    const c = loadConfig({ SVC_ADMIN_TOKEN: '', SVC_METRICS_TOKEN: '', DATABASE_URL: '' });
    expect(c.adminToken).toBeUndefined();
    expect(c.metricsToken).toBeUndefined();
    expect(c.databaseUrl).toBeUndefined();
  });

  it('an explicitly undefined variable takes the default', () => {
    const c = loadConfig({ PORT: undefined, SVC_DATA_DIR: undefined, SVC_ADMIN_TOKEN: undefined });
    expect(c.port).toBe(8080);
    expect(c.dataDir).toBe('./data');
    expect(c.adminToken).toBeUndefined();
  });

  it('ignores unrelated environment variables', () => {
    const c = loadConfig({
      PATH: '/usr/bin',
      HOME: '/root',
      NODE_ENV: 'production',
      port: 'abc', // names are case-sensitive
      SVC_UNKNOWN_THING: 'zz',
      DATABASE_URL_REPLICA: 'mysql://x',
    });
    expect(c.port).toBe(8080);
    expect(c.databaseUrl).toBeUndefined();
    expect(c).not.toHaveProperty('SVC_UNKNOWN_THING');
  });

  describe('does not read process.env', () => {
    const saved = process.env.PORT;
    afterEach(() => {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    });
    it('uses only the env it is given', () => {
      process.env.PORT = '1234';
      expect(loadConfig({}).port).toBe(8080);
    });
  });

  // A blank value (`PORT=` in an .env file) means unset, so the default applies rather than port 0.
  it('an empty or blank PORT does not silently become port 0', () => {
    for (const value of ['', ' ']) {
      let port: number | undefined;
      try {
        port = loadConfig({ PORT: value }).port;
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        continue;
      }
      expect(port).toBe(8080);
    }
  });
});
