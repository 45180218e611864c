import { z } from 'zod';
import { blankIsUnset, jsonEnv } from './parse.ts';

/**
 * The public arena: suites the operator declares (SVC_ARENA_SUITES, a JSON array), run on their cadence
 * against their models by the runner account, through the metered path under its API key
 * (SVC_ARENA_RUNNER_KEY_ID, a key with the inference scope). Without a runner key nothing runs and the
 * leaderboard is empty. A suite:
 * `{"slug":"capitals","name":"World capitals","cadence_seconds":86400,"models":["gpt-4o-mini"],"max_tokens":50,
 *   "temperature":0,"tasks":[{"id":"fr","messages":[{"role":"user","content":"Capital of France?"}],
 *   "assertions":[{"type":"contains","value":"Paris"}]}]}`. Assertion types: equals, contains, icontains, regex
 * (with optional flags), is_json, json_schema (as eval suites take them); a task passes when all of its pass.
 */
const Assertion = z.discriminatedUnion('type', [
  z.strictObject({ type: z.enum(['equals', 'contains', 'icontains']), value: z.string().min(1).max(10_000) }),
  z.strictObject({ type: z.literal('regex'), value: z.string().min(1).max(1000), flags: z.string().regex(/^[ims]{0,3}$/).optional() }),
  z.strictObject({ type: z.literal('is_json') }),
  z.strictObject({ type: z.literal('json_schema'), value: z.record(z.string(), z.unknown()) }),
]);

const Task = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'a task id is 1-64 of A-Z a-z 0-9 . _ -'),
  messages: z.array(z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string().max(32_768) })).min(1).max(50),
  assertions: z.array(Assertion).min(1).max(20),
});

export const ArenaSuiteSchema = z
  .strictObject({
    slug: z.string().regex(/^[a-z0-9](?:-?[a-z0-9]){0,63}$/, 'a slug is lower-case letters, digits and single inner hyphens'),
    name: z.string().min(1).max(200),
    description: z.string().max(2000).optional(),
    cadence_seconds: z.number().int().min(300).max(30 * 86400),
    models: z.array(z.string().min(1).max(200)).min(1).max(20),
    max_tokens: z.number().int().min(1).max(100_000).optional(),
    temperature: z.number().min(0).max(2).optional(),
    tasks: z.array(Task).min(1).max(200),
  })
  .superRefine((s, ctx) => {
    const ids = new Set<string>();
    s.tasks.forEach((t, i) => {
      if (ids.has(t.id)) ctx.addIssue({ code: 'custom', path: ['tasks', i, 'id'], message: `task id ${t.id} appears twice` });
      ids.add(t.id);
    });
  });
export type ArenaSuiteConfig = z.infer<typeof ArenaSuiteSchema>;

const SuiteList = z.array(ArenaSuiteSchema).max(50).superRefine((list, ctx) => {
  const slugs = new Set<string>();
  list.forEach((s, i) => {
    if (slugs.has(s.slug)) ctx.addIssue({ code: 'custom', path: [i, 'slug'], message: `suite slug ${s.slug} appears twice` });
    slugs.add(s.slug);
  });
});

export const arenaEnv = {
  SVC_ARENA_SUITES: jsonEnv(SuiteList, [] as ArenaSuiteConfig[], 'a JSON array of arena suites', (l) => l),
  SVC_ARENA_RUNNER_KEY_ID: z.preprocess(blankIsUnset, z.string().regex(/^key_[A-Za-z0-9]+$/, 'must be an API key id (key_...)').optional()),
};

export interface ArenaConfig {
  suites: ArenaSuiteConfig[];
  /** The runner account's API key; null: no runner, nothing runs. */
  runnerKeyId: string | null;
}

export function arenaConfig(e: { SVC_ARENA_SUITES: ArenaSuiteConfig[]; SVC_ARENA_RUNNER_KEY_ID?: string | undefined }): ArenaConfig {
  return { suites: e.SVC_ARENA_SUITES, runnerKeyId: e.SVC_ARENA_RUNNER_KEY_ID ?? null };
}
