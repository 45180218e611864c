import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.ts';

const providers = (value: string) => loadConfig({ SVC_PROVIDERS: value }).inference.providers;
const problem = (value: string) => {
  try {
    loadConfig({ SVC_PROVIDERS: value });
  } catch (e) {
    return (e as ConfigError).problems;
  }
  throw new Error(`SVC_PROVIDERS=${value} was accepted`);
};

describe('SVC_PROVIDERS', () => {
  it('takes base URLs alone: each a provider named after its host that lists its upstream’s models', () => {
    expect(providers('http://127.0.0.1:11434/v1')).toEqual([{ name: '127.0.0.1-11434', baseUrl: 'http://127.0.0.1:11434/v1', apiKey: undefined, outputLimitField: null, discover: true, models: [] }]);
    expect(providers(' http://localhost:11434/v1/, https://vllm.internal/v1  http://localhost:11434/v1 ').map((p) => [p.name, p.baseUrl])).toEqual([
      ['localhost-11434', 'http://localhost:11434/v1'],
      ['vllm.internal', 'https://vllm.internal/v1'],
      ['localhost-11434-2', 'http://localhost:11434/v1'],
    ]);
    expect(loadConfig({}).inference.refreshMs).toBe(60_000);
    expect(loadConfig({ SVC_PROVIDERS_REFRESH_SECONDS: '300' }).inference.refreshMs).toBe(300_000);
  });

  it('keeps the JSON form: a fixed list, or discovery when it names no models or says "discover": true', () => {
    const [fixed, open, priced] = providers(
      JSON.stringify([
        { name: 'a', base_url: 'https://a.example/v1', models: [{ id: 'm', input_micro_usd_per_mtok: 1, output_micro_usd_per_mtok: 2 }] },
        { name: 'b', base_url: 'http://b.example/v1', api_key: 'sk-b' },
        { name: 'c', base_url: 'http://c.example/v1', discover: true, models: [{ id: 'n', input_micro_usd_per_mtok: 3 }] },
      ]),
    );
    expect(fixed).toMatchObject({ name: 'a', discover: false, models: [{ id: 'm', inputMicroUsdPerMtok: 1, outputMicroUsdPerMtok: 2 }] });
    expect(open).toMatchObject({ name: 'b', discover: true, apiKey: 'sk-b', models: [] });
    expect(priced).toMatchObject({ name: 'c', discover: true, models: [{ id: 'n', inputMicroUsdPerMtok: 3, outputMicroUsdPerMtok: 0 }] });
  });

  it('refuses what is neither, naming the variable and the entry', () => {
    expect(problem('127.0.0.1:11434')).toEqual(['SVC_PROVIDERS: [0] "127.0.0.1:11434": must be an http(s) base URL (OpenAI-compatible, ending in /v1), or the whole value a JSON array of providers']);
    expect(problem('http://a/v1,ftp://b/v1')[0]).toMatch(/^SVC_PROVIDERS: \[1\] "ftp:\/\/b\/v1": must be an http\(s\) base URL/);
    expect(problem('[{"name":"a","base_url":"http://a/v1","discover":false}]')).toEqual(['SVC_PROVIDERS: [0].models: a provider with "discover": false needs models']);
    expect(problem('[{"name":"a","base_url":"http://a/v1"')[0]).toMatch(/^SVC_PROVIDERS: must be a JSON array of providers/);
  });
});
