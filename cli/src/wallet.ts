import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { usageError, fileProblem } from './errors.ts';

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;
const KEY_HINT = 'create one with `svc wallet create`, or pass --key-file <path> or set SVC_WALLET_KEY to a 0x-prefixed 32-byte hex private key';

/** Where `svc wallet create` writes the wallet key and `svc login` looks for it: wallet.key in the config directory. */
export function defaultWalletPath(configDir: string): string {
  return join(configDir, 'wallet.key');
}

export interface Wallet {
  account: PrivateKeyAccount;
  /** Where the key came from, for messages; never the key itself. */
  source: string;
  /** The key file can be read by group or others. */
  exposed: boolean;
}

/** Parses a private key; errors name the source and never echo its content. */
export function parsePrivateKey(raw: string, source: string): PrivateKeyAccount {
  const key = raw.trim();
  if (!PRIVATE_KEY.test(key)) throw usageError(`${source} does not hold a wallet private key (expected 0x followed by 64 hex digits)`, KEY_HINT);
  try {
    return privateKeyToAccount(key as `0x${string}`);
  } catch {
    throw usageError(`${source} is not a valid secp256k1 private key`, KEY_HINT);
  }
}

/** The signing wallet: --key-file, else SVC_WALLET_KEY, else wallet.key in the config directory. */
export function loadWallet(keyFile: string | undefined, configDir: string, env: NodeJS.ProcessEnv = process.env): Wallet {
  const fallback = defaultWalletPath(configDir);
  if (keyFile === undefined && !env.SVC_WALLET_KEY && existsSync(fallback)) keyFile = fallback;
  if (keyFile !== undefined) {
    const source = `key file ${keyFile}`;
    let raw: string;
    let mode: number;
    try {
      mode = statSync(keyFile).mode;
      raw = readFileSync(keyFile, 'utf8');
    } catch (err) {
      throw usageError(`cannot read ${source}: ${fileProblem(err)}`, KEY_HINT);
    }
    return { account: parsePrivateKey(raw, source), source, exposed: (mode & 0o077) !== 0 };
  }
  const fromEnv = env.SVC_WALLET_KEY;
  if (fromEnv !== undefined && fromEnv !== '') return { account: parsePrivateKey(fromEnv, 'SVC_WALLET_KEY'), source: 'SVC_WALLET_KEY', exposed: false };
  throw usageError(`no wallet key given, and none at ${fallback}`, KEY_HINT);
}
