import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { LANGUAGES, SANDBOX_JOBS, ServiceError } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import type { SandboxDeps } from './deps.ts';
import { RunResult } from './schemas.ts';

export const TERMINAL_ACCOUNT = 'acct_terminal';
const TIMEOUT_S = 10;

/** The keyless terminal's runs are metered to a house account and capped by a global daily budget (UTC day). */
export async function ensureTerminalAccount(db: Kysely<DB>, now: Date): Promise<void> {
  await db.insertInto('accounts').values({ id: TERMINAL_ACCOUNT, created_at: now, suspended_at: null, suspended_reason: null }).onConflict((oc) => oc.column('id').doNothing()).execute();
}

export function terminalRoutes(app: FastifyInstance, d: SandboxDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const principal: KeyPrincipal = { kind: 'key', accountId: TERMINAL_ACCOUNT, keyId: 'terminal', parentId: null, chain: [], scopes: [], spendCapMicroUsd: null, expiresAt: null };

  r.post(
    '/v1/terminal/run',
    {
      config: { auth: 'public', billable: true },
      // Flag off: 404 with an empty body before anything else looks at the request (its body included).
      onRequest: (_req, reply, done) => (d.config.terminal.enabled ? done() : void reply.code(404 as 200).send(undefined as never)),
      schema: {
        tags: ['sandboxes'],
        summary: 'Keyless code execution under a global daily budget. Behind a deployment flag: 404 with an empty body where off (the default)',
        body: z.object({ language: z.enum(LANGUAGES).default('sh'), code: z.string().min(1).max(64 * 1024), stdin: z.string().max(64 * 1024).optional() }).strict(),
        response: { 200: RunResult },
      },
    },
    async (req, reply) => {
      const now = d.clock.now();
      const dayStart = new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000);
      const spent = await d.db
        .selectFrom('sandbox_runs')
        .select((eb) => eb.fn.sum<number>('cost_micro_usd').as('s'))
        .where('account_id', '=', TERMINAL_ACCOUNT)
        .where('created_at', '>=', dayStart)
        .executeTakeFirstOrThrow();
      if (Number(spent.s ?? 0) >= d.config.terminal.dailyBudgetMicroUsd) {
        throw new ServiceError('rate_limited', "Today's budget for the keyless terminal is spent; it resets at 00:00 UTC", {
          retry_after: Math.ceil((dayStart.getTime() + 86_400_000 - now.getTime()) / 1000),
        });
      }
      const b = { ...req.body, timeout_seconds: TIMEOUT_S };
      const { result, receipt } = await d.executor.execute(
        principal,
        b,
        { kind: 'run', jobKind: SANDBOX_JOBS.run, payload: { ...d.executor.programPayload(b, TIMEOUT_S), files: [], network: false, limits: d.config.limits }, sessionId: null, network: false },
        { requestId: req.id, runId: null, resource: new URL('/v1/terminal/run', d.publicUrl).toString(), route: 'POST /v1/terminal/run' },
      );
      setReceiptHeaders(reply, receipt);
      return reply.send(result);
    },
  );
}
