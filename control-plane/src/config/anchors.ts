import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, intWithDefault, jsonEnv } from './parse.ts';

/**
 * Public anchors: the EVM chains batch roots are written to, as JSON in SVC_ANCHOR_CHAINS, e.g.
 * `[{"name":"base","chain_id":8453,"rpc_url":"https://...","confirmations":3}]`, and the account that pays
 * for the transactions: a file holding its 0x-hex private key (SVC_ANCHOR_KEY_FILE), required when a chain
 * is set. A Solana cluster is one more backend: SVC_ANCHOR_SOLANA (`{"rpc_url":"https://...","commitment":"finalized"}`,
 * name default `solana`) with SVC_ANCHOR_SOLANA_KEY_FILE, a solana-keygen keypair file (a JSON array of 64 bytes).
 * Without any backend, artifacts are still gathered into batches (their inclusion proofs exist) and their
 * anchor state says `not_anchored`.
 */
export interface AnchorChainConfig {
  name: string;
  chainId: number;
  rpcUrl: string;
  confirmations: number;
}

export interface AnchorSolanaConfig {
  name: string;
  rpcUrl: string;
  /** When a memo counts as anchored: `finalized` (default) or `confirmed`. */
  commitment: 'finalized' | 'confirmed';
  /** The solana-keygen keypair: 32 bytes of secret key, then 32 of public key. */
  keypair: Uint8Array;
}

export interface AnchorsConfig {
  chains: AnchorChainConfig[];
  solana: AnchorSolanaConfig | undefined;
  /** The paying account's private key (0x-hex), or undefined without chains. */
  privateKey: `0x${string}` | undefined;
  /** How often the leader gathers pending hashes into a batch and moves submissions on. */
  everyMs: number;
  /** The most leaves in one batch. */
  batchMax: number;
}

const Entry = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be a lowercase name such as base (letters, digits, dashes; at most 32)'),
    chain_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    rpc_url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }),
    confirmations: z.number().int().min(1).max(10_000).default(1),
  })
  .strict();

const List = z
  .array(Entry)
  .max(8)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    for (const [i, c] of list.entries()) {
      if (seen.has(c.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate name ${c.name}` });
      seen.add(c.name);
    }
  });

const Solana = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be a lowercase name (letters, digits, dashes; at most 32)').default('solana'),
    rpc_url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }),
    commitment: z.enum(['finalized', 'confirmed']).default('finalized'),
  })
  .strict();
type SolanaEntry = z.infer<typeof Solana>;

export const anchorsEnv = {
  SVC_ANCHOR_CHAINS: jsonEnv(List, [] as AnchorChainConfig[], 'a JSON array of chains', (list) =>
    list.map((c) => ({ name: c.name, chainId: c.chain_id, rpcUrl: c.rpc_url, confirmations: c.confirmations })),
  ),
  SVC_ANCHOR_KEY_FILE: z.string().min(1).optional(),
  SVC_ANCHOR_SOLANA: jsonEnv(Solana, undefined as SolanaEntry | undefined, 'a JSON object', (v) => v),
  SVC_ANCHOR_SOLANA_KEY_FILE: z.string().min(1).optional(),
  SVC_ANCHOR_EVERY_SECONDS: intWithDefault(60, 1, 86_400),
  SVC_ANCHOR_BATCH_MAX: intWithDefault(4096, 1, 65_536),
};

export function anchorsConfig(e: {
  SVC_ANCHOR_CHAINS: AnchorChainConfig[];
  SVC_ANCHOR_KEY_FILE?: string | undefined;
  SVC_ANCHOR_SOLANA: SolanaEntry | undefined;
  SVC_ANCHOR_SOLANA_KEY_FILE?: string | undefined;
  SVC_ANCHOR_EVERY_SECONDS: number;
  SVC_ANCHOR_BATCH_MAX: number;
}): AnchorsConfig {
  let privateKey: `0x${string}` | undefined;
  if (e.SVC_ANCHOR_CHAINS.length > 0) {
    if (!e.SVC_ANCHOR_KEY_FILE) throw new ConfigError(['SVC_ANCHOR_KEY_FILE: required when SVC_ANCHOR_CHAINS names a chain (the account that pays for anchor transactions)']);
    let raw: string;
    try {
      raw = readFileSync(e.SVC_ANCHOR_KEY_FILE, 'utf8').trim();
    } catch (err) {
      throw new ConfigError([`SVC_ANCHOR_KEY_FILE: cannot read ${e.SVC_ANCHOR_KEY_FILE} (${(err as Error).message})`]);
    }
    if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) throw new ConfigError([`SVC_ANCHOR_KEY_FILE: ${e.SVC_ANCHOR_KEY_FILE} must hold one 0x-prefixed 32-byte hex private key`]);
    privateKey = raw.toLowerCase() as `0x${string}`;
  }
  const names = new Set(e.SVC_ANCHOR_CHAINS.map((c) => c.name));
  if (e.SVC_ANCHOR_SOLANA && names.has(e.SVC_ANCHOR_SOLANA.name)) throw new ConfigError([`SVC_ANCHOR_SOLANA: name "${e.SVC_ANCHOR_SOLANA.name}" is taken by a chain of SVC_ANCHOR_CHAINS`]);
  const solana = e.SVC_ANCHOR_SOLANA
    ? { name: e.SVC_ANCHOR_SOLANA.name, rpcUrl: e.SVC_ANCHOR_SOLANA.rpc_url, commitment: e.SVC_ANCHOR_SOLANA.commitment, keypair: solanaKeypair(e.SVC_ANCHOR_SOLANA_KEY_FILE) }
    : undefined;
  return { chains: e.SVC_ANCHOR_CHAINS, solana, privateKey, everyMs: e.SVC_ANCHOR_EVERY_SECONDS * 1000, batchMax: e.SVC_ANCHOR_BATCH_MAX };
}

/** A solana-keygen keypair file: a JSON array of 64 bytes. */
function solanaKeypair(file: string | undefined): Uint8Array {
  if (!file) throw new ConfigError(['SVC_ANCHOR_SOLANA_KEY_FILE: required with SVC_ANCHOR_SOLANA (the keypair that pays for memo transactions)']);
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`SVC_ANCHOR_SOLANA_KEY_FILE: cannot read ${file} (${(err as Error).message})`]);
  }
  let bytes: unknown;
  try {
    bytes = JSON.parse(raw);
  } catch {
    bytes = null;
  }
  if (!Array.isArray(bytes) || bytes.length !== 64 || !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
    throw new ConfigError([`SVC_ANCHOR_SOLANA_KEY_FILE: ${file} must hold a solana-keygen keypair (a JSON array of 64 bytes)`]);
  }
  return Uint8Array.from(bytes as number[]);
}
