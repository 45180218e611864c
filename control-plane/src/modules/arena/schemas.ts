import { z } from 'zod';

export const SlugParams = z.object({ slug: z.string().min(1).max(64) });
export const RunParams = z.object({ id: z.string().min(1).max(64) });

const Message = z.object({ role: z.string(), content: z.string() });
const Assertion = z.object({ type: z.string() }).loose();
const Task = z.object({ id: z.string(), messages: z.array(Message), assertions: z.array(Assertion) });

export const SuiteSummary = z.object({
  slug: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  cadence_seconds: z.number().int().describe('Each (suite, model) runs again once this long has passed since its last run.'),
  models: z.array(z.string()),
  task_count: z.number().int(),
  tasks_sha256: z.string().describe('Hex sha256 of the RFC 8785 canonical JSON of the tasks array (GET /v1/arena/suites/{slug} shows it).'),
});

export const SuiteList = z.array(SuiteSummary).describe('The declared suites; an empty array when none are.');

export const SuiteDetail = z.object({
  slug: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  cadence_seconds: z.number().int(),
  models: z.array(z.string()),
  max_tokens: z.number().int().nullable(),
  temperature: z.number().nullable(),
  tasks: z.array(Task),
  canonical: z.string().describe('The canonical serialization of the tasks: the exact bytes tasks_sha256 covers.'),
  tasks_sha256: z.string(),
});

export const Leaderboard = z.object({
  rows: z.array(
    z.object({
      suite: z.string(),
      suite_name: z.string(),
      model: z.string(),
      run_id: z.string().describe('The run backing the row: completed, every task receipted, over the suite\'s current tasks.'),
      run_url: z.string(),
      pass_rate: z.number(),
      tasks_passed: z.number().int(),
      tasks_total: z.number().int(),
      tasks_sha256: z.string(),
      cost_micro_usd: z.number().int(),
      finished_at: z.string(),
    }),
  ).describe('One row per (suite, model), by suite then pass rate; empty until a runner account is configured.'),
  runner_configured: z.boolean(),
  generated_at: z.string(),
});

export const RunView = z.object({
  id: z.string(),
  object: z.literal('arena.run'),
  suite: z.string(),
  model: z.string(),
  tasks_sha256: z.string(),
  current_tasks: z.boolean().describe('Whether the run was over the suite\'s tasks as declared now.'),
  state: z.enum(['completed', 'failed']),
  receipted: z.boolean().describe('Every task has a receipt.'),
  tasks_total: z.number().int(),
  tasks_passed: z.number().int(),
  pass_rate: z.number(),
  cost_micro_usd: z.number().int(),
  started_at: z.string(),
  finished_at: z.string(),
  error: z.object({ type: z.string(), message: z.string() }).nullable().describe('Why a failed run stopped.'),
  tasks: z.array(
    z.object({
      task_id: z.string(),
      passed: z.boolean(),
      receipt_id: z.string().nullable().describe('Fetch it at GET /v1/receipts/shared/{receipt_id}; it verifies with any Ethereum library.'),
      receipt_url: z.string().nullable(),
      page_url: z.string().nullable(),
      output_sha256: z.string().nullable().describe('Hex sha256 of the canonical output (as replay capsules fingerprint it); the output itself is not kept.'),
      cost_micro_usd: z.number().int(),
      error: z.object({ type: z.string(), message: z.string() }).nullable(),
    }),
  ),
});
