import { describe, expect, it, vi } from 'vitest';
import { HEARTBEAT_SECONDS, type Capabilities, type HeartbeatBody } from '@svc/shared';
import { Agent, AGENT_VERSION, type Timers } from './agent.ts';
import type { HeartbeatAnswer } from './heartbeat.ts';

/** A fake clock for the agent's timers: nothing runs until advance() moves time past it. */
class FakeTimers implements Timers {
  now = 0;
  private next = 1;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): number {
    const id = this.next++;
    this.due.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.due.delete(handle as number);
  }
  pending(): number {
    return this.due.size;
  }
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const [id, t] = [...this.due.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0] ?? [];
      if (id === undefined || !t) break;
      this.due.delete(id);
      this.now = t.at;
      t.fn();
    }
    this.now = until;
  }
}

const caps: Capabilities = {
  cpu: { cores: 2, model: 'test', load: 0 },
  memory: { total_bytes: 1, available_bytes: 1 },
  disk: { total_bytes: 1, available_bytes: 1 },
  gpus: [],
  docker: { reachable: false, version: null },
  os: 'test',
};
const flush = () => new Promise((r) => setImmediate(r));

function agentWithFakeClock() {
  const timers = new FakeTimers();
  // A beat starts by reading the capability snapshot (synchronously, on the clock's time); the post follows.
  const beats: Array<{ at: number }> = [];
  const bodies: HeartbeatBody[] = [];
  const post = vi.fn(async (_url: string, _key: string, body: HeartbeatBody): Promise<HeartbeatAnswer> => {
    bodies.push(body);
    return { node_id: 'node_test', approved: true, disabled: false, draining: false, next_heartbeat_seconds: HEARTBEAT_SECONDS };
  });
  const agent = new Agent(
    { url: 'http://127.0.0.1:9', node_key: 'nk-svc_test', node_id: null, data_dir: '/tmp/unused', endpoint: 'http://10.0.0.2:8080' },
    {
      timers,
      postHeartbeat: post,
      readCapabilities: async () => {
        beats.push({ at: timers.now });
        return caps;
      },
      sandbox: false,
      log: () => undefined,
    },
  );
  return { agent, timers, beats, bodies, post };
}

describe('heartbeat cadence', () => {
  it('beats at once, then every 60 s on the injected clock, and never early', async () => {
    const { agent, timers, beats, post } = agentWithFakeClock();
    agent.startHeartbeats();
    await flush();
    expect(beats.map((b) => b.at)).toEqual([0]);
    timers.advance(HEARTBEAT_SECONDS * 1000 - 1);
    await flush();
    expect(beats).toHaveLength(1);
    timers.advance(1);
    await flush();
    expect(beats.map((b) => b.at)).toEqual([0, 60_000]);
    timers.advance(4 * 60_000);
    await flush();
    expect(beats.map((b) => b.at)).toEqual([0, 60_000, 120_000, 180_000, 240_000, 300_000]);
    expect(timers.pending()).toBe(1); // one next beat scheduled, never a pile-up
    expect(post).toHaveBeenCalledTimes(6);
    await agent.stop();
  });

  it('posts the capability snapshot, endpoint, load and agent version, and learns its node id', async () => {
    const { agent, bodies, post } = agentWithFakeClock();
    agent.startHeartbeats();
    await flush();
    expect(post).toHaveBeenCalledWith('http://127.0.0.1:9', 'nk-svc_test', expect.anything());
    expect(bodies[0]).toEqual({ capabilities: caps, endpoint: 'http://10.0.0.2:8080', load: { running_jobs: 0 }, agent_version: AGENT_VERSION });
    expect(agent.last?.node_id).toBe('node_test');
    await agent.stop();
  });

  it('stops beating when stopped', async () => {
    const { agent, timers, beats } = agentWithFakeClock();
    agent.startHeartbeats();
    timers.advance(60_000);
    await flush();
    expect(beats).toHaveLength(2);
    await agent.stop();
    expect(timers.pending()).toBe(0);
    timers.advance(10 * 60_000);
    await flush();
    expect(beats).toHaveLength(2);
  });
});
