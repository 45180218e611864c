import { describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '@svc/shared';
import { loadConfig } from '../../config.ts';
import { declareSuites } from './suites.ts';

const task = (id: string, assertions: unknown[] = [{ type: 'contains', value: 'x' }]) => ({ id, messages: [{ role: 'user', content: 'q' }], assertions });
const suite = (over: Record<string, unknown> = {}) => ({ slug: 'basics', name: 'Basics', cadence_seconds: 3600, models: ['m'], tasks: [task('a')], ...over });
const config = (suites: unknown, runner?: string) => loadConfig({ SVC_ARENA_SUITES: JSON.stringify(suites), ...(runner !== undefined ? { SVC_ARENA_RUNNER_KEY_ID: runner } : {}) }).arena;

describe('arena suites as declared', () => {
  it('hash the canonical JSON of their tasks', () => {
    const s = declareSuites(config([suite({ tasks: [task('b'), task('a', [{ value: 'x', type: 'contains' }])] })]).suites).get('basics')!;
    expect(s.canonical).toBe(canonicalize([task('b'), task('a')]));
    expect(s.tasks_sha256).toBe(sha256Hex(s.canonical));
  });

  it('are refused at boot when malformed, naming the place', () => {
    expect(() => config([suite({ tasks: [task('a'), task('a')] })])).toThrow(/\[0\]\.tasks\[1\]\.id: task id a appears twice/);
    expect(() => config([suite(), suite()])).toThrow(/\[1\]\.slug: suite slug basics appears twice/);
    expect(() => config([suite({ cadence_seconds: 10 })])).toThrow(/cadence_seconds/);
    expect(() => config([suite({ tasks: [task('a', [{ type: 'llm_rubric', value: 'x' }])] })])).toThrow(/assertions/);
    expect(() => config([suite()], 'sk-svc_secret')).toThrow(/SVC_ARENA_RUNNER_KEY_ID/);
    expect(() => declareSuites(config([suite({ tasks: [task('a', [{ type: 'regex', value: '(?<=x)y' }])] })]).suites)).toThrow(/SVC_ARENA_SUITES\[0\]\.tasks\[0\]\.assertions\[0\]/);
  });

  it('default to none, with no runner', () => {
    expect(loadConfig({}).arena).toEqual({ suites: [], runnerKeyId: null });
    expect(config([], '').runnerKeyId).toBeNull();
    expect(config([], 'key_abc').runnerKeyId).toBe('key_abc');
  });
});
