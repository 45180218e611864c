import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Command } from 'commander';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { configDir } from '../config.ts';
import { context } from '../context.ts';
import { CliError, EXIT_USAGE, fileProblem } from '../errors.ts';
import { fields } from '../output.ts';
import { defaultWalletPath, loadWallet } from '../wallet.ts';

/** `svc wallet`: the local wallet key that `svc login` signs in with. */
export function registerWallet(program: Command): void {
  const wallet = program.command('wallet').description('The local wallet key `svc login` signs in with (kept in the config directory, 0600)');

  wallet
    .command('create')
    .description('Create a new wallet key (a random secp256k1 key); never overwrites one')
    .option('--key-file <path>', 'where to write it (default: wallet.key in the config directory)')
    .action((opts: { keyFile?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const path = opts.keyFile ?? defaultWalletPath(configDir(ctx.env));
      const key = generatePrivateKey();
      try {
        if (mkdirSync(dirname(path), { recursive: true, mode: 0o700 }) !== undefined) chmodSync(dirname(path), 0o700);
        writeFileSync(path, `${key}\n`, { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
          const existing = loadWallet(path, ctx.dir);
          throw new CliError(`${path} already holds a wallet key (address ${existing.account.address})`, EXIT_USAGE, 'sign in with it: `svc login`; or give another --key-file');
        }
        throw new CliError(`cannot write ${path}: ${fileProblem(err)}`, EXIT_USAGE);
      }
      const address = privateKeyToAccount(key).address;
      ctx.out.result({ address, key_file: path }, () => fields([['address', address], ['key file', `${path} (0600: back it up; whoever holds it is your account)`]]));
    });

  wallet
    .command('address')
    .description("The address of the wallet key `svc login` would use")
    .option('--key-file <path>', 'the key file (default: SVC_WALLET_KEY, else wallet.key in the config directory)')
    .action((opts: { keyFile?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const w = loadWallet(opts.keyFile, ctx.dir, ctx.env);
      ctx.out.result({ address: w.account.address, source: w.source }, () => w.account.address);
    });
}
