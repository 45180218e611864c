import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from 'viem/accounts';
import type { EnrolledNode, NodeRegistryEntry, OwnerNode, PublicNode } from '@svc/shared/client';
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';
import { BIN, WallClock } from './support/cli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE_KEY = /nk-svc_[A-Za-z0-9_-]{43}/g;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let t: TestGateway;
let tmp: string;
let owner: string; // SVC_CONFIG_DIR of the signed-in owner
let stranger: string; // another account's

/** Runs the real CLI (the built one, as installed) in a child process against the test gateway. */
function svc(args: string[], opts: { dir?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_CONFIG_DIR: opts.dir ?? owner, ...opts.env };
  for (const k of ['SVC_WALLET_KEY', 'SVC_URL', 'SVC_ADMIN_TOKEN']) if (!opts.env?.[k]) delete env[k];
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, '--url', t.url, ...args], { cwd: ROOT, env, timeout: 25_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

function secretFile(name: string, content: string, mode = 0o600): string {
  const p = join(tmp, name);
  writeFileSync(p, content, { mode });
  return p;
}

async function login(dir: string): Promise<void> {
  const r = await svc(['login', '--key-file', secretFile(`${dir.split('/').pop()}.key`, generatePrivateKey())], { dir });
  expect(r.code, r.stderr).toBe(0);
}

const registry = () => t.client.nodes();
const entry = async (id: string) => (await registry()).find((n): n is PublicNode => n.id === id);
const statusOf = async (id: string) => (await entry(id))?.status;

/** What the agent sends every 60 s, posted with the node key the CLI printed. */
async function heartbeat(nodeKey: string): Promise<Response> {
  return fetch(`${t.url}/v1/nodes/heartbeat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${nodeKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      capabilities: { cpu: { cores: 4, model: 'test', load: 0 }, memory: { total_bytes: 1, available_bytes: 1 }, disk: { total_bytes: 1, available_bytes: 1 }, gpus: [], docker: { reachable: false, version: null }, os: 'test' },
      load: { running_jobs: 0 },
      agent_version: 'test',
    }),
  });
}

beforeAll(async () => {
  t = await startTestGateway({ clock: new WallClock() });
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-nodes-'));
  owner = join(tmp, 'owner');
  stranger = join(tmp, 'stranger');
  await Promise.all([login(owner), login(stranger)]);
});
afterAll(async () => {
  await t?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// Each CLI run is a Node process (~1-2 s): independent runs go in parallel, sequential tests get more time.
describe('svc nodes', { timeout: 60_000 }, () => {
  let gpu: EnrolledNode;
  let box: { id: string; key: string };

  it('enrolls an inference node with models, a model map and a speed factor (--json)', async () => {
    const r = await svc(['nodes', 'enroll', '--json', '--kinds', 'inference', '--name', 'gpu-box', '--model', 'llama-3-8b', '--model', 'qwen-7b', '--model-map', 'llama-3-8b=llama3:8b', '--speed-factor', '2']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    gpu = JSON.parse(r.stdout) as EnrolledNode;
    expect(gpu.node_key).toMatch(/^nk-svc_/);
    expect(r.stdout.match(NODE_KEY)).toEqual([gpu.node_key]);
    expect(gpu.node).toMatchObject({ name: 'gpu-box', kinds: ['inference'], models: ['llama-3-8b', 'qwen-7b'], model_map: { 'llama-3-8b': 'llama3:8b' }, declared_speed_factor: 2, approved: false });
  });

  it('prints the node key exactly once, with the next steps that keep it off command lines', async () => {
    const r = await svc(['nodes', 'enroll', '--kinds', 'sandbox', '--name', 'box']);
    expect(r.code).toBe(0);
    const keys = r.stdout.match(NODE_KEY) ?? [];
    expect(keys).toHaveLength(1);
    const id = /^Enrolled node (node_\S+)\.$/m.exec(r.stdout)?.[1];
    expect(id).toBeDefined();
    box = { id: id!, key: keys[0]! };
    expect(r.stdout).toMatch(/shown once/);
    expect(r.stdout).toContain('read -rs SVC_NODE_KEY && export SVC_NODE_KEY');
    expect(r.stdout).toContain(`svc-node enroll --url ${t.url}`);
    expect(r.stdout).toContain(`install.sh --url ${t.url} --key-file node.key`);
    expect(r.stdout).toContain(`svc nodes approve ${box.id}`);
    // The printed key is the real one: the agent's heartbeat authenticates with it.
    expect((await heartbeat(box.key)).status).toBe(200);
  });

  it('refuses bad enrollments: usage errors locally, the gateway\'s error type otherwise', async () => {
    const before = (await registry()).length;
    const usage = [['--kinds', 'gpu'], ['--kinds', ''], ['--kinds', 'sandbox', '--speed-factor', 'fast'], ['--kinds', 'inference', '--model-map', 'nomapping']];
    const [noModels, anon, ...bad] = await Promise.all([
      svc(['nodes', 'enroll', '--kinds', 'inference']),
      svc(['nodes', 'enroll', '--kinds', 'sandbox'], { dir: join(tmp, 'nobody') }),
      ...usage.map((args) => svc(['nodes', 'enroll', ...args])),
    ]);
    for (const [i, r] of bad.entries()) {
      expect({ args: usage[i], code: r!.code }).toEqual({ args: usage[i], code: 2 });
      expect(r!.stdout).not.toMatch(NODE_KEY);
    }
    expect((await registry()).length).toBe(before);
    expect(noModels!.code).toBe(1);
    expect(noModels!.stderr).toMatch(/^error: invalid_request: models: /m);
    expect(anon!.code).toBe(4); // authentication needed
    expect(anon!.stderr).toContain('svc login');
  });

  it('lists the registry: the new node pending approval, with kinds, models, speed, clamps, reliability and latency', async () => {
    expect((await heartbeat(gpu.node_key)).status).toBe(200);
    const human = await svc(['nodes', 'list']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^gateway: svc gateway \S+ \(online\)$/m);
    expect(human.stdout).toMatch(/^ID\s+NAME\s+KINDS\s+STATUS\s+MODELS\s+SPEED\s+CLAMPS\s+RELIABILITY\s+LATENCY$/m);
    expect(human.stdout).toMatch(new RegExp(`^${gpu.node.id}\\s+gpu-box\\s+inference\\s+pending approval\\s+llama-3-8b,qwen-7b\\s+2\\s+0\\s+-\\s+-$`, 'm'));
    expect(human.stdout).toMatch(new RegExp(`^${box.id}\\s+box\\s+sandbox\\s+pending approval\\s+-\\s+1\\s+0`, 'm'));
    expect(human.stdout).not.toMatch(/nk-svc_/);

    const json = JSON.parse((await svc(['nodes', 'list', '--json'])).stdout) as NodeRegistryEntry[];
    expect(json).toEqual(await registry());
    expect(json.find((n) => n.id === gpu.node.id)).toMatchObject({ status: 'pending_approval', speed_factor: 2, clamp_count: 0, reliability: null, latency_ms: null });
    // Listing needs no session.
    const anon = await svc(['nodes', 'list', '--json'], { dir: join(tmp, 'nobody') });
    expect(anon.code).toBe(0);
  });

  it('approves with the admin token from a file or SVC_ADMIN_TOKEN, and withdraws the approval with --revoke', async () => {
    const [none, wrong] = await Promise.all([
      svc(['nodes', 'approve', gpu.node.id]),
      svc(['nodes', 'approve', gpu.node.id], { env: { SVC_ADMIN_TOKEN: 'not-the-admin-token-0000' } }),
    ]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no admin token given/);
    expect(none.stderr).toMatch(/--admin-token-file/);

    expect(wrong.code).toBe(4); // a refused credential
    expect(wrong.stderr).toMatch(/^error: invalid_credential: /m);
    expect(wrong.stderr).not.toContain('not-the-admin-token');

    const file = secretFile('admin.token', `${ADMIN_TOKEN}\n`);
    const ok = await svc(['nodes', 'approve', gpu.node.id, '--admin-token-file', file]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`Approved ${gpu.node.id}`);
    expect(ok.stdout + ok.stderr).not.toContain(ADMIN_TOKEN);
    expect(await statusOf(gpu.node.id)).toBe('online');

    const revoke = await svc(['nodes', 'approve', gpu.node.id, '--revoke', '--json'], { env: { SVC_ADMIN_TOKEN: ADMIN_TOKEN } });
    expect(revoke.code).toBe(0);
    expect(JSON.parse(revoke.stdout) as OwnerNode).toMatchObject({ id: gpu.node.id, approved: false, status: 'pending_approval' });
    expect(await statusOf(gpu.node.id)).toBe('pending_approval');

    const loose = secretFile('loose.token', ADMIN_TOKEN, 0o644);
    const again = await svc(['nodes', 'approve', gpu.node.id, '--admin-token-file', loose]);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/readable by other users; chmod 600/);
    expect(await statusOf(gpu.node.id)).toBe('online');

    const unknown = await svc(['nodes', 'approve', 'node_doesnotexist', '--admin-token-file', file]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error: not_found: /m);
  }, 90_000);

  it('drain and disable toggle the owner gates, as the registry shows', async () => {
    const id = gpu.node.id;
    const steps: Array<[string[], string]> = [
      [['drain', id], 'draining'],
      [['drain', id, '--off'], 'online'],
      [['disable', id], 'disabled'],
      [['drain', id], 'disabled'], // disabled wins over draining
      [['disable', id, '--off'], 'draining'],
      [['drain', id, '--off'], 'online'],
    ];
    for (const [args, status] of steps) {
      const r = await svc(['nodes', ...args]);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
      expect(r.stdout).toContain(id);
      expect({ args, status: await statusOf(id) }).toEqual({ args, status });
    }
    const json = JSON.parse((await svc(['nodes', 'disable', id, '--json'])).stdout) as OwnerNode;
    expect(json).toMatchObject({ id, disabled: true, draining: false, status: 'disabled' });
    expect(JSON.stringify(json)).not.toContain(gpu.node_key);
    expect((await svc(['nodes', 'disable', id, '--off'])).code).toBe(0);
    expect(await statusOf(id)).toBe('online');
  }, 90_000);

  it('an admin drains and disables any node, the house node included, with --admin-token-file', async () => {
    const admin = t.client.withCredential({ kind: 'bearer', token: ADMIN_TOKEN });
    const house = (await admin.request<EnrolledNode>('POST', '/v1/admin/nodes/enroll', { body: { kinds: ['sandbox'], name: 'house' } })).node.id;
    await admin.approveNode(house);
    const file = secretFile('gate-admin.token', `${ADMIN_TOKEN}\n`);
    const flags = (id: string) => t.gw.fleet.registry.get(id).then((n) => ({ draining: n.draining, disabled: n.disabled }));
    // The owner route refuses the house node to anyone signed in: it is the house-ops account's.
    const owned = await svc(['nodes', 'drain', house]);
    expect(owned.code).toBe(1);
    expect(owned.stderr).toMatch(/^error: not_found: Node not found$/m);
    const steps: Array<[string[], { draining: boolean; disabled: boolean }]> = [
      [['drain', house], { draining: true, disabled: false }],
      [['disable', house], { draining: true, disabled: true }],
      [['drain', house, '--off'], { draining: false, disabled: true }],
      [['disable', house, '--off'], { draining: false, disabled: false }],
      [['drain', gpu.node.id], { draining: true, disabled: false }], // another account's node too
      [['drain', gpu.node.id, '--off'], { draining: false, disabled: false }],
    ];
    for (const [args, want] of steps) {
      const r = await svc(['nodes', ...args, '--admin-token-file', file]);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
      expect(r.stdout).toContain(args[1]);
      expect(r.stdout + r.stderr).not.toContain(ADMIN_TOKEN);
      expect({ args, flags: await flags(args[1]!) }).toEqual({ args, flags: want });
    }
    const json = JSON.parse((await svc(['nodes', 'disable', house, '--json', '--admin'], { env: { SVC_ADMIN_TOKEN: ADMIN_TOKEN } })).stdout) as OwnerNode;
    expect(json).toMatchObject({ id: house, house: true, disabled: true });
    const [unknown, noToken] = await Promise.all([svc(['nodes', 'drain', 'node_doesnotexist', '--admin-token-file', file]), svc(['nodes', 'drain', house, '--admin'])]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error: not_found: Node not found$/m);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/no admin token given/);
  }, 90_000);

  it('gate errors exit non-zero with the gateway\'s error type: unknown node, not the owner, not signed in', async () => {
    const [unknown, anon, missingArg, ...foreign] = await Promise.all([
      svc(['nodes', 'drain', 'node_doesnotexist']),
      svc(['nodes', 'disable', gpu.node.id], { dir: join(tmp, 'nobody') }),
      svc(['nodes', 'drain']),
      svc(['nodes', 'drain', gpu.node.id], { dir: stranger }),
      svc(['nodes', 'disable', gpu.node.id], { dir: stranger }),
    ]);
    expect(unknown!.code).toBe(1);
    expect(unknown!.stderr).toMatch(/^error: not_found: Node not found$/m);
    for (const r of foreign) {
      expect(r!.code).toBe(1);
      expect(r!.stderr).toMatch(/^error: not_found: Node not found$/m); // the same answer as an unknown node
    }
    expect(await statusOf(gpu.node.id)).toBe('online');
    expect(anon!.code).toBe(4); // authentication needed
    expect(anon!.stderr).toContain('svc login');
    expect(missingArg!.code).toBe(2);
  });
});
