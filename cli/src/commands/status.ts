import type { Command } from 'commander';
import { ApiError } from '@svc/shared/client';
import { context, usableSession, type Context } from '../context.ts';
import { fields } from '../output.ts';

interface SignedIn {
  signed_in: boolean;
  account_id?: string;
  wallet_address?: string | null;
  expires_at?: string;
  reason?: string;
}

/** Whether the saved session still works on this gateway, asked of /v1/auth/me. */
async function whoami(ctx: Context): Promise<SignedIn> {
  const r = usableSession(ctx);
  if ('why' in r) return { signed_in: false, reason: r.why };
  try {
    const me = await ctx.client.withCredential({ kind: 'session', token: r.session.token }).me();
    return { signed_in: true, account_id: me.account_id, wallet_address: me.wallet_address, expires_at: r.session.expires_at };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return { signed_in: false, reason: `the saved session was rejected (${err.type}: ${err.message})` };
    throw err;
  }
}

function str(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

function statusText(url: string, status: Record<string, unknown>, who: SignedIn): string {
  const pairs: [string, string][] = [
    ['gateway', url],
    ['status', str(status.status)],
  ];
  const db = status.database as { ok?: boolean; latency_ms?: number } | undefined;
  if (db) pairs.push(['database', `${db.ok ? 'ok' : 'failing'} (${db.latency_ms ?? '?'} ms)`]);
  const proc = status.process as { uptime_seconds?: number } | undefined;
  if (proc?.uptime_seconds !== undefined) pairs.push(['process up', `${Math.round(proc.uptime_seconds)} s`]);
  const uptime = status.uptime as Record<string, { uptime_ratio?: number | null }> | undefined;
  for (const [window, u] of Object.entries(uptime ?? {})) {
    pairs.push([`uptime ${window}`, u.uptime_ratio === null || u.uptime_ratio === undefined ? 'no samples' : `${(u.uptime_ratio * 100).toFixed(3)}%`]);
  }
  pairs.push(['signed in', who.signed_in ? `yes, as ${who.account_id} (wallet ${who.wallet_address ?? 'none'}), until ${who.expires_at}` : `no: ${who.reason} (run \`svc login\`)`]);
  return fields(pairs);
}

export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('Show the gateway status and whether you are signed in')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const status = await ctx.client.status();
      const who = await whoami(ctx);
      ctx.out.result({ url: ctx.url, gateway: status, session: who }, () => statusText(ctx.url, status, who));
    });
}
