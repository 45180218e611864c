import type { Command } from 'commander';
import { ApiError, SvcClient } from '@svc/shared/client';
import { deleteSession, saveSession, sessionPath } from '../config.ts';
import { context, usableSession } from '../context.ts';
import { CliError } from '../errors.ts';
import { fields } from '../output.ts';
import { loadWallet } from '../wallet.ts';

export function registerLogin(program: Command): void {
  program
    .command('login')
    .description('Sign in with an Ethereum wallet (Sign-In with Ethereum) and save the session')
    .option('--key-file <path>', 'file holding the wallet private key (0x + 64 hex digits); default: env SVC_WALLET_KEY')
    .action(async (opts: { keyFile?: string }, cmd: Command) => {
      const wallet = loadWallet(opts.keyFile);
      const ctx = context(cmd);
      if (wallet.exposed) ctx.out.note(`warning: ${wallet.source} is readable by other users; chmod 600 it`);
      const previous = usableSession(ctx);
      const { session } = await ctx.client.signIn(wallet.account);
      const file = saveSession(ctx.dir, {
        url: ctx.url,
        token: session.token,
        account_id: session.account_id,
        wallet_address: session.wallet_address,
        expires_at: session.expires_at,
      });
      // The replaced session is no longer stored anywhere: revoke it, best effort.
      if ('session' in previous && previous.session.token !== session.token) {
        await ctx.client.withCredential({ kind: 'session', token: previous.session.token }).logout().catch(() => undefined);
      }
      const result = {
        url: ctx.url,
        account_id: session.account_id,
        wallet_address: session.wallet_address,
        expires_at: session.expires_at,
        created_account: session.created_account,
        session_file: file,
      };
      ctx.out.result(result, () =>
        [
          `Signed in to ${ctx.url}${session.created_account ? ' (new account created)' : ''}.`,
          fields([
            ['account', session.account_id],
            ['wallet', session.wallet_address],
            ['expires', session.expires_at],
            ['session', file],
          ]),
        ].join('\n'),
      );
    });

  program
    .command('logout')
    .description('Revoke the saved session on the gateway and delete session.json')
    .option('--force', 'delete session.json even if the gateway cannot be reached to revoke it')
    .action(async (opts: { force?: boolean }, cmd: Command) => {
      const ctx = context(cmd);
      const s = ctx.session;
      if (!s && !ctx.sessionProblem) {
        ctx.out.result({ signed_out: false, revoked: 0 }, () => 'Not signed in; nothing to do.');
        return;
      }
      let revoked = 0;
      if (s) {
        // Revoke where the session was issued, whatever --url says.
        const client = new SvcClient({ baseUrl: s.url, credential: { kind: 'session', token: s.token } });
        try {
          revoked = (await client.logout()).revoked;
        } catch (err) {
          // 401: the gateway no longer honours the token, which is the goal. Anything else: keep it to retry.
          if (!(err instanceof ApiError && err.status === 401) && !opts.force) {
            const why = err instanceof ApiError ? `${err.type}: ${err.message}` : err instanceof Error ? err.message : String(err);
            throw new CliError(`the gateway at ${s.url} did not revoke the session (${why}); kept ${sessionPath(ctx.dir)}`, 1, 'retry `svc logout`, or `svc logout --force` to delete it locally anyway');
          }
        }
      }
      deleteSession(ctx.dir);
      ctx.out.result({ signed_out: true, revoked }, () => `Signed out${s ? ` of ${s.url}` : ''}; removed ${sessionPath(ctx.dir)}.`);
    });
}
