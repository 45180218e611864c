import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_JOBS, type ExecResult } from '@svc/shared';
import { startSandbox, type Sandbox } from './index.ts';
import { LABEL, OWNER } from './limits.ts';
import { reap } from './reaper.ts';
import { call, docker, dockerForTests, LIMITS, SMALL_IMAGE, tempDataDir } from './testkit.ts';

const up = await dockerForTests();
const RUNS = 20;

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe.skipIf(!up)('the warm pool and the reaper against the real Docker engine', () => {
  let warm: Sandbox;
  let cold: Sandbox;
  beforeAll(async () => {
    const w = await startSandbox({ image: SMALL_IMAGE, poolSize: 2, dataDir: tempDataDir(), log: () => undefined });
    const c = await startSandbox({ image: SMALL_IMAGE, poolSize: 0, dataDir: tempDataDir(), log: () => undefined });
    if ('unavailable' in w) throw new Error(w.unavailable);
    if ('unavailable' in c) throw new Error(c.unavailable);
    [warm, cold] = [w, c];
    await Promise.all([warm.ready, cold.ready]);
  });
  afterAll(async () => {
    await Promise.all([warm?.stop(), cold?.stop()]);
  });

  const echo = async (sb: Sandbox) => {
    const t0 = performance.now();
    const r = await call<ExecResult>(sb.handlers[SANDBOX_JOBS.run], { language: 'sh', code: 'echo hi', timeout_ms: 10_000, limits: LIMITS });
    const ms = performance.now() - t0;
    expect(r.stdout).toBe('hi\n');
    return ms;
  };

  it(`makes a warm \`echo hi\` run faster than a cold one (p50 over ${RUNS} runs each, printed; no timing assertion)`, async () => {
    const w: number[] = [];
    const c: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // Measured alone: the pool is full before each warm run, and no refill runs during a cold one.
      await warm.pool.fill();
      expect(warm.pool.available).toBe(2);
      w.push(await echo(warm));
      await warm.pool.fill();
      c.push(await echo(cold));
    }
    console.log(`sandbox.run \`echo hi\`: warm p50 ${p50(w).toFixed(1)} ms (min ${Math.min(...w).toFixed(1)}), cold p50 ${p50(c).toFixed(1)} ms (min ${Math.min(...c).toFixed(1)}) over ${RUNS} runs each`);
  });

  it('falls back to a cold container when the pool is empty, and refills', async () => {
    await warm.pool.fill();
    const results = await Promise.all([echo(warm), echo(warm), echo(warm)]);
    expect(results).toHaveLength(3);
    await warm.pool.fill();
    expect(warm.pool.available).toBe(2);
  });

  it('skips warm containers that died while they waited', async () => {
    await warm.pool.fill();
    for (const id of docker('ps', '-q', '--filter', `label=${LABEL.instance}=${warm.docker.instance}`).split('\n').filter(Boolean)) docker('kill', id);
    expect((await echo(warm)) > 0).toBe(true);
    await warm.pool.fill();
    expect(warm.pool.available).toBe(2);
  });

  it('reaps an orphaned labelled container and volume, and spares live ones', async () => {
    const dead = spawnSync('true').pid!;
    const labels = (instance: string, pid: number) => [
      ['--label', `${LABEL.owner}=${OWNER}`],
      ['--label', `${LABEL.kind}=run`],
      ['--label', `${LABEL.id}=job_orphan`],
      ['--label', `${LABEL.instance}=${instance}`],
      ['--label', `${LABEL.pid}=${pid}`],
    ].flat();
    const name = `svc-run-orphan-${process.pid}`;
    docker('volume', 'create', ...labels('gone-agent', dead), `${name}-ws`);
    docker('create', '--name', name, ...labels('gone-agent', dead), '-v', `${name}-ws:/workspace`, SMALL_IMAGE, 'sleep', '1000');
    // One of this agent's own, not owned by any live run: also an orphan.
    const mine = `svc-run-mine-${process.pid}`;
    docker('create', '--name', mine, ...labels(warm.docker.instance, process.pid), SMALL_IMAGE, 'sleep', '1000');
    const poolBefore = warm.pool.available;

    const r = await reap(warm.docker, warm.snapshots);
    expect(r.containers).toBeGreaterThanOrEqual(2);
    expect(() => docker('inspect', name)).toThrow();
    expect(() => docker('inspect', mine)).toThrow();
    expect(() => docker('volume', 'inspect', `${name}-ws`)).toThrow();
    // The warm pool's containers (live) and the other sandbox's (a live agent) are still there.
    expect(warm.pool.available).toBe(poolBefore);
    const ours = docker('ps', '-q', '--filter', `label=${LABEL.instance}=${warm.docker.instance}`).split('\n').filter(Boolean);
    expect(ours.length).toBe(poolBefore);
    expect((await echo(warm)) > 0).toBe(true);
  });

  it('stops the boxes of an agent that dies (SIGKILL): their stdin closes; the next reaper removes them', async () => {
    const script = `
      import { startSandbox } from './index.ts';
      const s = await startSandbox({ image: '${SMALL_IMAGE}', poolSize: 1, dataDir: '${tempDataDir()}', log: () => {} });
      await s.pool.fill();
      await s.sessions.create({ session_id: 'sess_dies', limits: ${JSON.stringify(LIMITS)}, idle_timeout_ms: 600000 });
      console.log('ready ' + s.docker.instance);
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('.', import.meta.url)), stdio: ['ignore', 'pipe', 'inherit'] });
    const instance = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        const m = /ready (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error(`child exited early: ${out}`)));
    });
    const filter = ['--filter', `label=${LABEL.instance}=${instance}`];
    expect(docker('ps', '-q', ...filter).split('\n').filter(Boolean)).toHaveLength(2);
    child.kill('SIGKILL');
    let running = 2;
    for (let i = 0; i < 100 && running > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      running = docker('ps', '-q', ...filter).split('\n').filter(Boolean).length;
    }
    expect(running).toBe(0);
    await reap(warm.docker);
    expect(docker('ps', '-aq', ...filter)).toBe('');
    expect(docker('volume', 'ls', '-q', '--filter', `label=${LABEL.instance}=${instance}`)).toBe('');
  });
});
