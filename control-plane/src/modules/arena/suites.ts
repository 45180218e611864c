import { canonicalize, sha256Hex } from '@svc/shared';
import type { ArenaSuiteConfig } from '../../config/arena.ts';
import { compileAssertion, newAjv, regexProblem, schemaProblem, type AssertionSpec, type Checker } from '../evals/assertions.ts';

/** A declared suite ready to run: its tasks' canonical serialization and digest, each task's checkers. */
export interface DeclaredSuite {
  config: ArenaSuiteConfig;
  /** RFC 8785 canonical JSON of the tasks array: the bytes tasks_sha256 covers. */
  canonical: string;
  tasks_sha256: string;
  checkers: Checker[][];
}

/**
 * The operator's suites compiled at boot: a pattern RE2 refuses or a schema Ajv cannot compile stops the
 * gateway with the place named (SVC_ARENA_SUITES[i].tasks[j].assertions[k]).
 */
export function declareSuites(list: ArenaSuiteConfig[]): Map<string, DeclaredSuite> {
  const ajv = newAjv();
  const out = new Map<string, DeclaredSuite>();
  list.forEach((s, i) => {
    const checkers = s.tasks.map((t, j) =>
      t.assertions.map((a, k) => {
        const where = `SVC_ARENA_SUITES[${i}].tasks[${j}].assertions[${k}]`;
        const problem = a.type === 'regex' ? regexProblem(a.value, a.flags) : a.type === 'json_schema' ? schemaProblem(a.value, ajv) : null;
        if (problem) throw new Error(`${where}: ${problem}`);
        return compileAssertion({ ...a, weight: 1 } as AssertionSpec, ajv, '');
      }),
    );
    const canonical = canonicalize(s.tasks);
    out.set(s.slug, { config: s, canonical, tasks_sha256: sha256Hex(canonical), checkers });
  });
  return out;
}
