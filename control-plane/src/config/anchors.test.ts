import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { anchorsConfig, anchorsEnv } from './anchors.ts';

const parse = (env: Record<string, string>) => anchorsConfig(z.object(anchorsEnv).parse(env));
const dir = mkdtempSync(join(tmpdir(), 'svc-anchor-config-'));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const CHAIN = JSON.stringify([{ name: 'base', chain_id: 8453, rpc_url: 'https://rpc.example' }]);

describe('anchor configuration', () => {
  it('has no backend by default', () => {
    expect(parse({})).toMatchObject({ chains: [], solana: undefined, privateKey: undefined, everyMs: 60_000, batchMax: 4096 });
  });

  it('needs the paying key with a chain, and one that holds a key', () => {
    expect(() => parse({ SVC_ANCHOR_CHAINS: CHAIN })).toThrow(/SVC_ANCHOR_KEY_FILE: required/);
    expect(() => parse({ SVC_ANCHOR_CHAINS: CHAIN, SVC_ANCHOR_KEY_FILE: file('bad.key', 'nope') })).toThrow(/must hold one 0x-prefixed/);
    expect(() => parse({ SVC_ANCHOR_CHAINS: CHAIN, SVC_ANCHOR_KEY_FILE: join(dir, 'missing.key') })).toThrow(/cannot read/);
    const c = parse({ SVC_ANCHOR_CHAINS: CHAIN, SVC_ANCHOR_KEY_FILE: file('ok.key', `0x${'AB'.repeat(32)}\n`) });
    expect(c.privateKey).toBe(`0x${'ab'.repeat(32)}`);
    expect(c.chains[0]).toEqual({ name: 'base', chainId: 8453, rpcUrl: 'https://rpc.example', confirmations: 1 });
  });

  it('refuses unknown fields, duplicate names and a Solana backend named like a chain', () => {
    expect(() => parse({ SVC_ANCHOR_CHAINS: JSON.stringify([{ name: 'base', chain_id: 1, rpc_url: 'https://x', contract: '0x' }]) })).toThrow(/contract/);
    const two = JSON.stringify([
      { name: 'base', chain_id: 1, rpc_url: 'https://x' },
      { name: 'base', chain_id: 2, rpc_url: 'https://y' },
    ]);
    expect(() => parse({ SVC_ANCHOR_CHAINS: two })).toThrow(/duplicate name/);
    const keypair = file('id.json', JSON.stringify(Array.from({ length: 64 }, (_, i) => i)));
    expect(() =>
      parse({ SVC_ANCHOR_CHAINS: CHAIN, SVC_ANCHOR_KEY_FILE: file('k2.key', `0x${'cd'.repeat(32)}`), SVC_ANCHOR_SOLANA: JSON.stringify({ name: 'base', rpc_url: 'https://s' }), SVC_ANCHOR_SOLANA_KEY_FILE: keypair }),
    ).toThrow(/taken by a chain/);
  });

  it('reads a solana-keygen keypair file (64 bytes) and refuses anything else', () => {
    expect(() => parse({ SVC_ANCHOR_SOLANA: JSON.stringify({ rpc_url: 'https://s' }) })).toThrow(/SVC_ANCHOR_SOLANA_KEY_FILE: required/);
    expect(() => parse({ SVC_ANCHOR_SOLANA: JSON.stringify({ rpc_url: 'https://s' }), SVC_ANCHOR_SOLANA_KEY_FILE: file('short.json', '[1,2,3]') })).toThrow(/64 bytes/);
    const c = parse({ SVC_ANCHOR_SOLANA: JSON.stringify({ rpc_url: 'https://s', commitment: 'confirmed' }), SVC_ANCHOR_SOLANA_KEY_FILE: file('id2.json', JSON.stringify(Array(64).fill(7))) });
    expect(c.solana).toMatchObject({ name: 'solana', rpcUrl: 'https://s', commitment: 'confirmed' });
    expect(c.solana!.keypair).toHaveLength(64);
  });
});
