import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_JOBS, type ExecResult } from '@svc/shared';
import { SandboxDocker } from './docker.ts';
import { startSandbox, type Sandbox } from './index.ts';
import { LABEL, OWNER } from './limits.ts';
import { QUIET_MS, WarmPool } from './pool.ts';
import { HALF_LIFE_MS, PoolSize, type PoolSizeOptions } from './pool-size.ts';
import { reap } from './reaper.ts';
import { call, docker, LIMITS, sandboxImage, SMALL_IMAGE, tempDataDir } from './testkit.ts';

const up = sandboxImage();
const RUNS = 20;

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const MiB = 1024 * 1024;

describe('pool sizing from the arrival rate of runs (injected clock)', () => {
  const sizing = (o: Partial<PoolSizeOptions> = {}) => {
    const clock = { t: 1_000_000 };
    const size = new PoolSize({ floor: 3, maxBoxes: 32, boxBytes: () => 64 * MiB, availableBytes: () => 16 * 1024 * MiB, now: () => clock.t, ...o });
    /** `n` runs arriving `gapMs` apart. */
    const arrive = (n: number, gapMs: number) => {
      for (let i = 0; i < n; i++) {
        clock.t += gapMs;
        size.arrived();
      }
    };
    return { size, clock, arrive };
  };

  it('holds the floor with no demand, and nothing when the floor is 0', () => {
    expect(sizing().size.target()).toBe(3);
    const off = sizing({ floor: 0 });
    off.arrive(50, 10);
    expect(off.size.target()).toBe(0);
  });

  it('raises the target with the arrival rate: faster arrivals, more boxes', () => {
    const slow = sizing();
    slow.arrive(30, 2000); // one run every 2 s: the floor covers it
    expect(slow.size.target()).toBe(3);
    const paced = sizing();
    paced.arrive(30, 250);
    const fast = sizing();
    fast.arrive(30, 50);
    expect(paced.size.target()).toBeGreaterThan(3);
    expect(fast.size.target()).toBeGreaterThan(paced.size.target());
    expect(fast.size.rate()).toBeGreaterThan(paced.size.rate());
  });

  it('starts refills ahead of demand: two quick runs out of three warm boxes already ask for more than they took', () => {
    const { size, arrive } = sizing();
    let ready = 3;
    arrive(1, 50);
    ready--;
    arrive(1, 50);
    ready--;
    expect(ready).toBe(1);
    // Boxes to prepare now: more than the two taken, while the pool still has a box.
    expect(size.target() - ready).toBeGreaterThan(2);
    arrive(3, 50);
    expect(size.target()).toBeGreaterThan(6);
  });

  it('doubles the target when a run finds the pool empty, within the ceiling', () => {
    const { size, clock, arrive } = sizing({ maxBoxes: 20 });
    arrive(1, 3000); // runs that wait for cold containers arrive seldom: the rate alone keeps the floor
    expect(size.target()).toBe(3);
    size.missed();
    expect(size.target()).toBe(6);
    clock.t += 3000;
    arrive(1, 0);
    size.missed();
    expect(size.target()).toBe(12);
    size.missed();
    expect(size.target()).toBe(20);
    size.missed();
    expect(size.target()).toBe(20);
    clock.t += 10 * 60_000;
    expect(size.target()).toBe(3);
  });

  it('comes down gradually when demand stops, and is back at the floor when idle', () => {
    const { size, clock, arrive } = sizing();
    arrive(40, 50);
    const peak = size.target();
    expect(peak).toBeGreaterThan(10);
    clock.t += 5_000; // the rate has faded; the peak is still held (a burst soon after finds the pool large)
    const soon = size.target();
    expect(soon).toBeLessThanOrEqual(peak);
    expect(soon).toBeGreaterThan(peak / 2);
    clock.t += HALF_LIFE_MS * 2;
    const later = size.target();
    expect(later).toBeLessThan(soon);
    expect(later).toBeGreaterThan(3);
    clock.t += 5 * 60_000;
    expect(size.target()).toBe(3);
    expect(size.rate()).toBeLessThan(0.001);
  });

  it('never goes above the ceiling: the maximum, or the memory share at the warm boxes\' limit', () => {
    const capped = sizing({ maxBoxes: 8 });
    capped.arrive(500, 5);
    expect(capped.size.target()).toBe(8);
    expect(capped.size.ceiling()).toBe(8);
    // 1 GiB available, a quarter of it at 64 MiB a box: 4 boxes.
    const memory = { bytes: 1024 * MiB };
    const short = sizing({ availableBytes: () => memory.bytes });
    short.arrive(500, 5);
    expect(short.size.target()).toBe(4);
    // Boxes with a larger limit, or less memory: the ceiling falls, but never below the floor.
    memory.bytes = 256 * MiB;
    expect(short.size.target()).toBe(3);
    const big = sizing({ boxBytes: () => 2048 * MiB });
    big.arrive(500, 5);
    expect(big.size.target()).toBe(big.size.ceiling());
    expect(big.size.ceiling()).toBe(3);
  });
});

describe.skipIf(!up)('the warm pool and the reaper against the real Docker engine', () => {
  let warm: Sandbox;
  let cold: Sandbox;
  beforeAll(async () => {
    // A fixed size (floor and ceiling 2), so these tests can count its containers.
    const w = await startSandbox({ image: SMALL_IMAGE, poolSize: 2, poolMax: 2, dataDir: tempDataDir(), log: () => undefined });
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
  }, 120_000); // forty container lifecycles: minutes on a loaded 2-core engine

  it('falls back to a cold container when the pool is empty, and refills', async () => {
    await warm.pool.fill();
    const results = await Promise.all([echo(warm), echo(warm), echo(warm)]);
    expect(results).toHaveLength(3);
    await warm.pool.fill();
    expect(warm.pool.available).toBe(2);
  });

  it('skips warm containers that died while they waited', async () => {
    await warm.pool.fill();
    const warmBoxes = docker('ps', '-q', '--filter', `label=${LABEL.instance}=${warm.docker.instance}`, '--filter', `label=${LABEL.kind}=pool`).split('\n').filter(Boolean);
    expect(warmBoxes).toHaveLength(2);
    for (const id of warmBoxes) docker('kill', id);
    expect((await echo(warm)) > 0).toBe(true);
    await warm.pool.fill();
    expect(warm.pool.available).toBe(2);
  });

  it('grows under a burst of runs, comes back to its floor when idle, and leaves no container behind', async () => {
    const clock = { t: 0 };
    const sd = new SandboxDocker(SMALL_IMAGE);
    const pool = new WarmPool(sd, 1, () => undefined, { maxBoxes: 4, now: () => clock.t });
    const ours = () => docker('ps', '-aq', '--filter', `label=${LABEL.instance}=${sd.instance}`).split('\n').filter(Boolean).length;
    const settled = async () => {
      // Boxes above the target are removed in the background: wait until the engine has none over the pool's count.
      for (let i = 0; i < 100 && ours() !== pool.available; i++) await new Promise((r) => setTimeout(r, 100));
      return ours();
    };
    try {
      await pool.fill();
      expect(pool.available).toBe(1);
      // Eight runs 50 ms apart (on the pool's clock): the target rises to the ceiling as they arrive.
      for (let i = 0; i < 8; i++) {
        clock.t += 50;
        const box = await pool.take(LIMITS);
        if (box) await sd.destroyBox(box);
      }
      expect(pool.target).toBe(4);
      await pool.fill();
      expect(pool.available).toBe(4);
      expect(await settled()).toBe(4);
      clock.t += 10 * 60_000; // idle
      expect(pool.target).toBe(1);
      await pool.fill();
      expect(pool.available).toBe(1);
      expect(await settled()).toBe(1);
    } finally {
      await pool.close();
      sd.close();
    }
    expect(pool.available).toBe(0);
    expect(ours()).toBe(0);
    expect(docker('volume', 'ls', '-q', '--filter', `label=${LABEL.instance}=${sd.instance}`)).toBe('');
  });

  it('leaves the engine to runs under way: no refill while the stock lasts, used boxes removed in the next gap', async () => {
    const clock = { t: 0 };
    const sd = new SandboxDocker(SMALL_IMAGE);
    const pool = new WarmPool(sd, 4, () => undefined, { maxBoxes: 4, now: () => clock.t });
    const ours = () => docker('ps', '-aq', '--filter', `label=${LABEL.instance}=${sd.instance}`).split('\n').filter(Boolean).length;
    try {
      await pool.fill();
      expect(pool.available).toBe(4);
      // Three runs, one after the other, with no time passing between them (on the pool's clock).
      for (let i = 0; i < 3; i++) {
        pool.runStarted();
        const box = await pool.take(LIMITS);
        expect(box).toBeDefined();
        // The stock (3, 2, 1 of 4) is not short: nothing is prepared while the run is under way.
        expect(pool.preparingBoxes).toBe(0);
        pool.runEnded(box);
      }
      // The used boxes wait (exited or stopping, not removed) while runs come close together.
      expect(pool.pendingRemoval).toBe(3);
      expect(ours()).toBe(4);
      // The fourth run leaves the stock empty (short): one box is prepared, even with runs coming.
      pool.runStarted();
      const last = await pool.take(LIMITS);
      expect(pool.available).toBe(0);
      expect(pool.preparingBoxes).toBe(1);
      pool.runEnded(last);
      // A gap: the used boxes are removed and the pool is back at its target.
      clock.t += QUIET_MS;
      await pool.fill();
      expect(pool.pendingRemoval).toBe(0);
      expect(pool.available).toBe(4);
      expect(ours()).toBe(4);
    } finally {
      await pool.close();
      sd.close();
    }
    expect(ours()).toBe(0);
  });

  it('removes every warm container when the sandbox stops, also while the pool is growing', async () => {
    const sb = await startSandbox({ image: SMALL_IMAGE, poolSize: 2, poolMax: 6, dataDir: tempDataDir(), log: () => undefined });
    if ('unavailable' in sb) throw new Error(sb.unavailable);
    // The pool's own (a run's box is removed by its run, in the background).
    const filter = [`label=${LABEL.instance}=${sb.docker.instance}`, '--filter', `label=${LABEL.kind}=pool`];
    try {
      await sb.ready;
      await sb.pool.fill();
      // Six runs at once: the target rises above the floor and refills start; stop comes while they are under way.
      await Promise.all(Array.from({ length: 6 }, () => echo(sb)));
      expect(sb.pool.target).toBeGreaterThan(2);
    } finally {
      await sb.stop();
    }
    expect(docker('ps', '-aq', '--filter', ...filter)).toBe('');
    expect(docker('volume', 'ls', '-q', '--filter', ...filter)).toBe('');
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
