import type { Command } from 'commander';
import { ApiError, SvcClient } from '@svc/shared/client';
import { sessionsPath, storeSessions, withSession, withoutSession, type Session } from '../config.ts';
import { context, normalizeUrl, usableSession, type Context } from '../context.ts';
import { CliError, EXIT_AUTH, EXIT_FAILURE } from '../errors.ts';
import { fields, table } from '../output.ts';
import { loadWallet } from '../wallet.ts';

/** Revokes a saved session where it was issued; a 401 means the gateway no longer honours it, which is the goal. */
async function revoke(s: Session): Promise<{ revoked: number } | { why: string }> {
  const client = new SvcClient({ baseUrl: s.url, credential: { kind: 'session', token: s.token } });
  try {
    return { revoked: (await client.logout()).revoked };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return { revoked: 0 };
    return { why: err instanceof ApiError ? `${err.type}: ${err.message}` : err instanceof TypeError && err.message === 'fetch failed' ? 'the gateway cannot be reached' : err instanceof Error ? err.message : String(err) };
  }
}

interface SessionCheck {
  url: string;
  default: boolean;
  account_id: string;
  wallet_address: string;
  expires_at: string;
  /** valid: the gateway accepts it now; rejected: it answered 401; expired: past expires_at; unreachable: no answer. */
  state: 'valid' | 'rejected' | 'expired' | 'unreachable';
  reason?: string;
}

async function check(ctx: Context, s: Session): Promise<SessionCheck> {
  const base = { url: s.url, default: ctx.store.default === s.url, account_id: s.account_id, wallet_address: s.wallet_address, expires_at: s.expires_at };
  const exp = Date.parse(s.expires_at);
  if (Number.isFinite(exp) && exp <= Date.now()) return { ...base, state: 'expired' };
  try {
    await new SvcClient({ baseUrl: s.url, credential: { kind: 'session', token: s.token } }).me();
    return { ...base, state: 'valid' };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return { ...base, state: 'rejected', reason: `${err.type}: ${err.message}` };
    return { ...base, state: 'unreachable', reason: err instanceof ApiError ? `${err.type}: ${err.message}` : err instanceof Error ? err.message : String(err) };
  }
}

export function registerLogin(program: Command): void {
  program
    .command('login')
    .description('Sign in to a gateway with an Ethereum wallet (Sign-In with Ethereum) and save its session beside the others')
    .option('--key-file <path>', 'file holding the wallet private key (default: env SVC_WALLET_KEY, else wallet.key in the config directory)')
    .addHelpText('after', '\nOne session is kept per gateway: `svc login --url B` signs in to B and keeps the session of A. The gateway signed in to last is the default for commands without --url. No wallet key yet? `svc wallet create`.')
    .action(async (opts: { keyFile?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const wallet = loadWallet(opts.keyFile, ctx.dir, ctx.env);
      if (wallet.exposed) ctx.out.note(`warning: ${wallet.source} is readable by other users; chmod 600 it`);
      const previous = usableSession(ctx);
      const { session } = await ctx.client.signIn(wallet.account);
      const file = storeSessions(ctx.dir, withSession(ctx.store, { url: ctx.url, token: session.token, account_id: session.account_id, wallet_address: session.wallet_address, expires_at: session.expires_at }));
      // The replaced session of this gateway is no longer stored anywhere: revoke it, best effort.
      if ('session' in previous && previous.session.token !== session.token) await revoke(previous.session);
      const others = Object.keys(ctx.store.sessions).filter((u) => u !== ctx.url);
      const result = {
        url: ctx.url,
        account_id: session.account_id,
        wallet_address: session.wallet_address,
        expires_at: session.expires_at,
        created_account: session.created_account,
        session_file: file,
        other_sessions: others,
      };
      ctx.out.result(result, () =>
        [
          `Signed in to ${ctx.url}${session.created_account ? ' (new account created)' : ''}; it is now the default gateway.`,
          fields([
            ['account', session.account_id],
            ['wallet', session.wallet_address],
            ['expires', session.expires_at],
            ['sessions', file],
            ...(others.length ? ([['also signed in to', others.join(', ')]] as [string, string][]) : []),
          ]),
        ].join('\n'),
      );
    });

  program
    .command('logout')
    .description("Revoke this gateway's saved session on the gateway and forget it (--all: every saved session)")
    .option('--all', 'sign out of every gateway with a saved session')
    .option('--force', 'forget a session even if its gateway cannot be reached to revoke it')
    .action(async (opts: { all?: boolean; force?: boolean }, cmd: Command) => {
      const ctx = context(cmd);
      const targets = opts.all ? Object.values(ctx.store.sessions) : ctx.session ? [ctx.session] : [];
      if (targets.length === 0 && !(ctx.sessionProblem && opts.all)) {
        const others = Object.keys(ctx.store.sessions);
        ctx.out.result({ signed_out: [], revoked: 0 }, () => `Not signed in to ${ctx.url}; nothing to do.${others.length ? ` (Signed in to ${others.join(', ')}: \`svc logout --url <origin>\` or \`svc logout --all\`.)` : ''}`);
        return;
      }
      let store = ctx.store;
      let revoked = 0;
      const out: string[] = [];
      const failed: string[] = [];
      for (const s of targets) {
        const r = await revoke(s);
        if ('why' in r && !opts.force) {
          failed.push(`${s.url} (${r.why})`);
          continue;
        }
        if ('revoked' in r) revoked += r.revoked;
        store = withoutSession(store, s.url);
        out.push(s.url);
      }
      const file = out.length || ctx.sessionProblem ? storeSessions(ctx.dir, ctx.sessionProblem && opts.all ? { default: null, sessions: {} } : store) : sessionsPath(ctx.dir);
      if (failed.length) {
        throw new CliError(`the gateway did not revoke the session of ${failed.join(', ')}; kept it in ${file}`, EXIT_FAILURE, 'retry `svc logout`, or `svc logout --force` to forget it anyway');
      }
      ctx.out.result({ signed_out: out, revoked }, () => `Signed out of ${out.join(', ') || 'nothing'}; ${Object.keys(store.sessions).length ? `sessions left in ${file}` : `removed ${file}`}.`);
    });

  const auth = program.command('auth').description('The saved sessions: one per gateway');

  auth
    .command('status')
    .description('Every saved session: its gateway, account and expiry, and whether the gateway accepts it now')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      if (ctx.sessionProblem) throw new CliError(`the saved sessions are unusable: ${ctx.sessionProblem}`, EXIT_AUTH, 'run `svc login` to sign in again');
      const saved = Object.values(ctx.store.sessions);
      if (saved.length === 0) throw new CliError('not signed in to any gateway', EXIT_AUTH, 'run `svc login` to sign in');
      const checks = await Promise.all(saved.map((s) => check(ctx, s)));
      ctx.out.result({ default: ctx.store.default, sessions: checks }, () =>
        table(
          ['GATEWAY', 'ACCOUNT', 'WALLET', 'EXPIRES', 'STATE'],
          checks.map((c) => [`${c.url}${c.default ? ' (default)' : ''}`, c.account_id, c.wallet_address, c.expires_at, c.reason ? `${c.state}: ${c.reason}` : c.state]),
        ),
      );
    });

  auth
    .command('switch <origin>')
    .description('Make another signed-in gateway the default for commands without --url')
    .action((origin: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const url = normalizeUrl(origin);
      if (!ctx.store.sessions[url]) throw new CliError(`not signed in to ${url}`, EXIT_AUTH, `sign in with \`svc login --url ${url}\``);
      storeSessions(ctx.dir, { ...ctx.store, default: url });
      ctx.out.result({ default: url }, () => `${url} is now the default gateway.`);
    });
}
