import { describe, expect, it } from 'vitest';
import { SANDBOX_JOBS } from '@svc/shared';
import { startSandbox } from './index.ts';
import { call, dockerEngine, LIMITS, tempDataDir } from './testkit.ts';

const up = dockerEngine('the missing-image test');

describe('the sandbox without a usable engine or image', () => {
  it('reports why when Docker is unreachable (the agent then registers no sandbox jobs)', async () => {
    const s = await startSandbox({ socketPath: '/nonexistent/docker.sock', dataDir: tempDataDir(), log: () => undefined });
    expect(s).toHaveProperty('unavailable');
    expect((s as { unavailable: string }).unavailable).toMatch(/Docker is not reachable at \/nonexistent\/docker\.sock/);
  });

  it.skipIf(!up)('fails runs with a clear message when the image is missing', async () => {
    const logs: string[] = [];
    const s = await startSandbox({ image: 'svc-sandbox:does-not-exist', poolSize: 2, dataDir: tempDataDir(), log: (m) => logs.push(m) });
    if ('unavailable' in s) throw new Error(s.unavailable);
    try {
      expect(logs.join('\n')).toMatch(/svc-sandbox:does-not-exist is not on this node/);
      await expect(call(s.handlers[SANDBOX_JOBS.run], { language: 'sh', code: 'true', timeout_ms: 1000, limits: LIMITS })).rejects.toThrow(/is not on this node; build it with installers\/sandbox-image\/build\.sh/);
    } finally {
      await s.stop();
    }
  });
});
