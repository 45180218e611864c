import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { describe, expect, it } from 'vitest';

/**
 * No import circles in the project's code: data flows one way. The module graph is the one esbuild resolves for
 * the build (type-only imports are gone from it, as at run time), static and dynamic imports alike, from each
 * package's entry points; dependencies are left out.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ENTRIES = ['control-plane/src/main.ts', 'node-agent/src/cli.ts', 'cli/src/main.ts', 'shared/src/index.ts', 'shared/src/client/index.ts'];

async function importGraph(entries: string[]): Promise<Map<string, string[]>> {
  const r = await esbuild.build({ absWorkingDir: ROOT, entryPoints: entries, bundle: true, write: false, metafile: true, platform: 'node', format: 'esm', packages: 'external', splitting: true, outdir: 'out', logLevel: 'silent' });
  const inputs = r.metafile.inputs;
  return new Map(Object.entries(inputs).map(([file, v]) => [file, v.imports.filter((i) => i.path in inputs).map((i) => i.path)]));
}

/** Every circle a depth-first walk meets, each as the files around it (the first repeated at the end). */
export function circles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (n: string) => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 'open') found.push([...stack.slice(stack.indexOf(m)), m]);
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of graph.keys()) if (!state.has(n)) visit(n);
  return found;
}

describe('import circles', () => {
  it('are found: a graph with one names the files around it', () => {
    const g = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
    ]);
    expect(circles(g)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
    expect(circles(new Map([['a.ts', ['b.ts']], ['b.ts', []]]))).toEqual([]);
  });

  it('there are none in the control plane, the node agent, the CLI and the shared package', async () => {
    const graph = await importGraph(ENTRIES);
    expect(graph.size).toBeGreaterThan(500);
    expect(circles(graph).map((c) => c.join(' -> '))).toEqual([]);
  });
});
