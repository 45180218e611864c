import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import type { Agents } from './create.ts';
import { agentHookRoutes } from './routes-hooks.ts';
import { agentMessageRoutes } from './routes-messages.ts';
import { AgentView, DeployBody, GateBody, IdParams, RunParams, RunView, TriggerBody, TriggerResult, TriggersBody } from './schemas.ts';
import { MAX_AGENTS } from './service.ts';

/** Hosted agents (spec: agents): deploy, list, run now, gate, triggers, runs, delete; hooks and mailboxes beside. */
export function agentsRoutes(app: FastifyInstance, agents: Agents): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['agents'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/agents',
    {
      config,
      schema: { tags, summary: `Deploy a hosted agent: code sealed, a bounded key minted (never shown), optional schedule; at most ${MAX_AGENTS} per account`, body: DeployBody, response: { 201: AgentView } },
    },
    async (req, reply) => reply.code(201).send(await agents.service.deploy(me(req), req.body)),
  );

  r.get(
    '/v1/agents',
    { config, schema: { tags, summary: 'Agents with schedule, triggers, hook state, key, last run and run count; never code or secrets', response: { 200: z.object({ agents: z.array(AgentView) }) } } },
    async (req) => ({ agents: await agents.service.list(me(req)) }),
  );

  r.post(
    '/v1/agents/:id/trigger',
    {
      config: { ...config, billable: true },
      schema: {
        tags,
        summary: "Run now as a sandbox run under the agent's key; answers the whole sandbox result once (output never stored); 409 disabled, 429 over max_runs_per_hour",
        params: IdParams,
        body: TriggerBody.default({}),
        response: { 200: TriggerResult },
      },
    },
    async (req, reply) => {
      const { result, receipt, run } = await agents.runner.runNow(me(req), req.params.id, req.body.input ?? '');
      setReceiptHeaders(reply, receipt);
      return { ...result, agent_id: run.agent_id, run_id: run.id };
    },
  );

  r.post(
    '/v1/agents/:id/gate',
    { config, schema: { tags, summary: 'Enable or disable the agent: a disabled agent takes no run of any trigger', params: IdParams, body: GateBody, response: { 200: AgentView } } },
    async (req) => agents.service.gate(me(req), req.params.id, req.body.enabled),
  );

  r.post(
    '/v1/agents/:id/triggers',
    { config, schema: { tags, summary: 'Set the mailbox trigger and max_runs_per_hour', params: IdParams, body: TriggersBody, response: { 200: AgentView } } },
    async (req) => agents.service.setTriggers(me(req), req.params.id, req.body),
  );

  r.get(
    '/v1/agents/:id/runs',
    { config, schema: { tags, summary: 'The 100 newest runs with their receipts; metadata only', params: IdParams, response: { 200: z.object({ runs: z.array(RunView), agent_id: z.string() }) } } },
    async (req) => agents.service.runs(me(req), req.params.id),
  );

  r.get(
    '/v1/agents/:id/runs/:run_id',
    { config, schema: { tags, summary: 'One run; metadata only', params: RunParams, response: { 200: RunView } } },
    async (req) => agents.service.run(me(req), req.params.id, req.params.run_id),
  );

  r.delete(
    '/v1/agents/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete: the agent key and its subtree revoked; code, key secret, runs and mailbox deleted (receipts stay)',
        params: IdParams,
        response: { 200: z.object({ id: z.string(), object: z.literal('agent'), deleted: z.literal(true), key_id: z.string(), revoked_ids: z.array(z.string()) }) },
      },
    },
    async (req) => agents.service.remove(me(req), req.params.id),
  );

  agentHookRoutes(app, agents);
  agentMessageRoutes(app, agents);
}
