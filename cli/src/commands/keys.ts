import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { SCOPE_NAMES, readDateTime, type Scope } from '@svc/shared';
import type { ApiKey, KeyInput, NewApiKey } from '@svc/shared/client';
import { context, sessionClient } from '../context.ts';
import { CliError, EXIT_USAGE, fileProblem } from '../errors.ts';
import { fields, table, usd } from '../output.ts';

const SHOWN_ONCE = 'This secret is shown once and cannot be retrieved again; store it now.';

function collectScopes(value: string, previous: Scope[]): Scope[] {
  const out = [...previous];
  for (const s of value.split(',').map((x) => x.trim()).filter(Boolean)) {
    if (!(SCOPE_NAMES as readonly string[]).includes(s)) throw new InvalidArgumentError(`unknown scope "${s}"; one of: ${SCOPE_NAMES.join(', ')}`);
    if (!out.includes(s as Scope)) out.push(s as Scope);
  }
  return out;
}

function nonNegativeInt(what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`${what} must be a non-negative integer`);
    return n;
  };
}

function isoDate(value: string): string {
  const r = readDateTime(value.trim());
  if (!r.ok) throw new InvalidArgumentError(r.reason);
  return r.date.toISOString();
}

function scopesText(scopes: readonly string[]): string {
  return scopes.length === 0 ? 'all' : scopes.join(',');
}

function secretBlock(k: NewApiKey, heading: string, secretFile?: string): string {
  const facts = fields([['id', k.id], ['name', k.name ?? '-'], ['scopes', scopesText(k.scopes)], ['spend cap', usd(k.spend_cap_micro_usd)], ['expires', k.expires_at ?? 'never']]);
  if (secretFile) return [heading, facts, '', `The secret is in ${secretFile} (0600), shown nowhere else: \`export SVC_KEY=$(cat ${secretFile})\` or --api-key-file ${secretFile}.`].join('\n');
  return [heading, facts, '', SHOWN_ONCE, `  ${k.key}`].join('\n');
}

/**
 * A new 0600 file for a secret, created before the key is minted (so a path that cannot be written costs no
 * key) and never over an existing one. `write` fills it; `discard` removes it when no key came.
 */
function secretFileFor(path: string): { write(secret: string): void; discard(): void } {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new CliError(`${path} already exists; the secret file is never overwritten`, EXIT_USAGE, 'give another --secret-file, or remove that one');
    throw new CliError(`cannot write ${path}: ${fileProblem(err)}`, EXIT_USAGE);
  }
  return {
    write(secret) {
      writeSync(fd, `${secret}\n`);
      closeSync(fd);
    },
    discard() {
      closeSync(fd);
      rmSync(path, { force: true });
    },
  };
}

export function keysTable(keys: readonly ApiKey[]): string {
  if (keys.length === 0) return 'No API keys. Create one with `svc keys create`.';
  const rows = keys.map((k) => [k.id, k.name ?? '-', k.prefix, k.status, scopesText(k.scopes), usd(k.spent_micro_usd), usd(k.subtree_spent_micro_usd)]);
  return table(['ID', 'NAME', 'PREFIX', 'STATUS', 'SCOPES', 'SPENT', 'SUBTREE SPENT'], rows);
}

function oldKeyNote(old: { id: string; expires_at: string; status: string }): string {
  return old.status === 'expiring' ? `The old key ${old.id} keeps working until ${old.expires_at}.` : `The old key ${old.id} is ${old.status} as of ${old.expires_at}.`;
}

interface CreateOptions {
  name?: string;
  scope: Scope[];
  spendCap?: number;
  expiresAt?: string;
  secretFile?: string;
}

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('Manage the API keys of the signed-in account');

  keys
    .command('create')
    .description('Mint an API key; its secret is printed once')
    .option('--name <name>', 'a label for the key')
    .option('--scope <scope>', `limit the key to a scope (repeatable or comma-separated; default all): ${SCOPE_NAMES.join(', ')}`, collectScopes, [])
    .option('--spend-cap <micro_usd>', 'lifetime spend cap in micro-USD (1000000 = $1)', nonNegativeInt('--spend-cap'))
    .option('--expires-at <iso>', 'expiry as an ISO 8601 date-time', isoDate)
    .option('--secret-file <path>', 'write the secret to this new file (0600) instead of printing it')
    .action(async (opts: CreateOptions, cmd: Command) => {
      const ctx = context(cmd);
      const { client } = sessionClient(ctx);
      const input: KeyInput = {};
      if (opts.name !== undefined) input.name = opts.name;
      if (opts.scope.length > 0) input.scopes = opts.scope;
      if (opts.spendCap !== undefined) input.spend_cap_micro_usd = opts.spendCap;
      if (opts.expiresAt !== undefined) input.expires_at = opts.expiresAt;
      const file = opts.secretFile === undefined ? null : secretFileFor(opts.secretFile);
      let key: NewApiKey;
      try {
        key = await client.createKey(input);
      } catch (err) {
        file?.discard();
        throw err;
      }
      if (!file) return ctx.out.result(key, () => secretBlock(key, `Created API key ${key.id}.`));
      file.write(key.key);
      const { key: _secret, ...shown } = key;
      ctx.out.result({ ...shown, secret_file: opts.secretFile }, () => secretBlock(key, `Created API key ${key.id}.`, opts.secretFile));
    });

  keys
    .command('list')
    .description('List every key of the account with its spend and its delegated subtree spend')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const list = await sessionClient(ctx).client.listKeys();
      ctx.out.result(list, () => keysTable(list));
    });

  keys
    .command('rotate <id>')
    .description('Replace a key with a scope-identical one; the old key keeps working through the grace window')
    .option('--grace <seconds>', "how long the old key keeps working (default: the gateway's)", nonNegativeInt('--grace'))
    .action(async (id: string, opts: { grace?: number }, cmd: Command) => {
      const ctx = context(cmd);
      const key = await sessionClient(ctx).client.rotateKey(id, opts.grace);
      ctx.out.result(key, () =>
        [secretBlock(key, `Rotated ${key.replaces.id} -> ${key.id}.`), '', oldKeyNote(key.replaces)].join('\n'),
      );
    });

  keys
    .command('revoke <id>')
    .description('Revoke a key and every key delegated from it')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const r = await sessionClient(ctx).client.revokeKey(id);
      const others = r.revoked_ids.filter((x) => x !== r.id);
      ctx.out.result(r, () =>
        [`Revoked ${r.id}.`, others.length > 0 ? `Also revoked ${others.length} delegated key(s): ${others.join(', ')}` : ''].filter(Boolean).join('\n'),
      );
    });
}
