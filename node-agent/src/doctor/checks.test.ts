import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Capabilities } from '@svc/shared';
import { runChecks, type Check, type DoctorInputs } from './checks.ts';
import { formatChecks } from './command.ts';

/**
 * The doctor against real servers on this machine: an HTTP server on a Unix socket answering the two Docker
 * Engine API calls it makes, a control plane answering /healthz, the heartbeat and /v1/nodes, and an
 * OpenAI-compatible model list. Each test sets what they answer.
 */
type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
const listen = async (h: { current: Handler }, path?: string): Promise<Server> => {
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => h.current(req, body, res));
  });
  await new Promise<void>((r) => (path ? s.listen(path, r) : s.listen(0, '127.0.0.1', r)));
  return s;
};
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

const KEY = `nk-svc_${'a'.repeat(43)}`;
const caps: Capabilities = { cpu: { cores: 1, model: 't', load: 0 }, memory: { total_bytes: 1, available_bytes: 1 }, disk: { total_bytes: 1, available_bytes: 1 }, gpus: [], docker: { reachable: true, version: '1' }, os: 't' };

let dir: string;
let socket: string;
let docker: Server, gateway: Server, models: Server;
const dockerH = { current: (() => undefined) as Handler };
const gatewayH = { current: (() => undefined) as Handler };
const modelsH = { current: (() => undefined) as Handler };
let gatewayUrl: string;
let modelsUrl: string;
let heartbeats: Array<{ auth: string | undefined; body: unknown }>;

const healthyDocker: Handler = (req, _b, res) =>
  req.url === '/version' ? json(res, 200, { Version: '27.5.1' }) : req.url === '/images/svc-sandbox%3Alatest/json' ? json(res, 200, { Id: 'sha256:0123456789abcdef0123' }) : json(res, 404, { message: 'No such image' });
const healthyGateway =
  (opts: { date?: (now: number) => string; key?: boolean; models?: string[] } = {}): Handler =>
  (req, body, res) => {
    const date = opts.date?.(Date.now());
    const h: Record<string, string> = date ? { date } : {};
    if (req.url === '/healthz') return json(res, 200, 'ok', h);
    if (req.url === '/v1/nodes/heartbeat') {
      heartbeats.push({ auth: req.headers.authorization, body: JSON.parse(body) });
      return opts.key === false
        ? json(res, 401, { error: { type: 'unauthorized', message: 'unknown or revoked node key' } })
        : json(res, 200, { node_id: 'nd_1', approved: true, disabled: false, draining: false, next_heartbeat_seconds: 60, received_at: new Date().toISOString() });
    }
    if (req.url === '/v1/nodes') return json(res, 200, [{ id: 'gateway' }, { id: 'nd_1', type: 'node', models: opts.models ?? [] }]);
    json(res, 404, { error: { message: 'not found' } });
  };

const inputs = (o: Partial<DoctorInputs> = {}): DoctorInputs => ({
  config: { url: gatewayUrl, node_key: KEY, node_id: null, data_dir: join(dir, 'data'), endpoint: null },
  dockerSocket: socket,
  image: 'svc-sandbox:latest',
  imageBuild: 'sudo /opt/svc-node/sandbox-image/build.sh',
  inference: null,
  capabilities: async () => caps,
  agentVersion: '0.1.0-test',
  minFreeBytes: 1,
  ...o,
});
const byName = (checks: Check[]) => Object.fromEntries(checks.map((c) => [c.name, c]));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-doctor-'));
  socket = join(dir, 'docker.sock');
  docker = await listen(dockerH, socket);
  gateway = await listen(gatewayH);
  models = await listen(modelsH);
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as { port: number }).port}`;
  modelsUrl = `http://127.0.0.1:${(models.address() as { port: number }).port}/v1`;
});
afterAll(async () => {
  for (const s of [docker, gateway, models]) await new Promise((r) => s.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe('svc-node doctor checks', () => {
  it('passes every check on a healthy node, sending the node key in one heartbeat', async () => {
    heartbeats = [];
    dockerH.current = healthyDocker;
    gatewayH.current = healthyGateway();
    const checks = await runChecks(inputs());
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['config', true],
      ['docker', true],
      ['image', true],
      ['gateway', true],
      ['clock', true],
      ['node key', true],
      ['data dir', true],
      ['inference', true],
    ]);
    expect(byName(checks).docker!.detail).toContain('Docker 27.5.1');
    expect(byName(checks)['node key']!.detail).toContain('nd_1, approved');
    expect(heartbeats).toEqual([{ auth: `Bearer ${KEY}`, body: { capabilities: caps, endpoint: null, load: { running_jobs: 0 }, agent_version: '0.1.0-test' } }]);
    expect(formatChecks(checks)).toMatch(/all 8 checks passed\n$/);
  });

  it('says how to build a missing sandbox image, and how to start a Docker engine that does not answer', async () => {
    dockerH.current = (req, _b, res) => (req.url === '/version' ? json(res, 200, { Version: '27.5.1' }) : json(res, 404, { message: 'No such image' }));
    gatewayH.current = healthyGateway();
    const missing = byName(await runChecks(inputs()));
    expect(missing.image).toMatchObject({ ok: false, fix: expect.stringContaining('sudo /opt/svc-node/sandbox-image/build.sh') });
    const none = byName(await runChecks(inputs({ dockerSocket: join(dir, 'no-such.sock') })));
    expect(none.docker).toMatchObject({ ok: false, detail: expect.stringContaining('ENOENT'), fix: expect.stringContaining('apt install docker.io') });
    expect(none.image!.ok).toBe(false);
  });

  it('fails the clock beyond the allowed skew, either way, from the Date header', async () => {
    dockerH.current = healthyDocker;
    for (const [offset, word] of [[-5 * 60_000, 'ahead of'], [5 * 60_000, 'behind']] as const) {
      gatewayH.current = healthyGateway({ date: (now) => new Date(now + offset).toUTCString() });
      const clock = byName(await runChecks(inputs())).clock!;
      expect(clock.ok).toBe(false);
      expect(clock.detail).toMatch(new RegExp(`clock is (29\\d|300) s ${word} the control plane's`));
      expect(clock.fix).toContain('timedatectl set-ntp true');
    }
    // The same answer is within the skew for a host whose clock (injected) agrees with the gateway's.
    gatewayH.current = healthyGateway({ date: (now) => new Date(now + 5 * 60_000).toUTCString() });
    expect(byName(await runChecks(inputs({ now: () => Date.now() + 5 * 60_000 }))).clock!.ok).toBe(true);
  });

  it('reports a refused node key and an unreachable control plane, each with what to do', async () => {
    dockerH.current = healthyDocker;
    gatewayH.current = healthyGateway({ key: false });
    const refused = byName(await runChecks(inputs()))['node key']!;
    expect(refused).toMatchObject({ ok: false, detail: 'refused: unknown or revoked node key', fix: expect.stringContaining('svc-node enroll') });
    const closed = await listen({ current: () => undefined });
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const down = await runChecks(inputs({ config: { url: `http://127.0.0.1:${port}`, node_key: KEY, node_id: null, data_dir: join(dir, 'data'), endpoint: null } }));
    expect(byName(down).gateway).toMatchObject({ ok: false, detail: expect.stringContaining('ECONNREFUSED') });
    expect(byName(down)['node key']!.ok).toBe(false);
  });

  it('fails a data dir it cannot write or that lacks room for snapshots', async () => {
    dockerH.current = healthyDocker;
    gatewayH.current = healthyGateway();
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const unwritable = byName(await runChecks(inputs({ config: { url: gatewayUrl, node_key: KEY, node_id: null, data_dir: join(file, 'data'), endpoint: null } })))['data dir']!;
    expect(unwritable).toMatchObject({ ok: false, detail: expect.stringContaining('is not writable'), fix: expect.stringContaining('install -d -m 0700 -o svc-node') });
    const full = byName(await runChecks(inputs({ minFreeBytes: Number.MAX_SAFE_INTEGER })))['data dir']!;
    expect(full).toMatchObject({ ok: false, detail: expect.stringContaining('snapshots and workspaces need at least') });
  });

  it('checks that the local inference server answers and lists every model the node declares', async () => {
    dockerH.current = healthyDocker;
    gatewayH.current = healthyGateway({ models: ['llama-3-8b', 'qwen-7b'] });
    modelsH.current = (req, _b, res) => (req.url === '/v1/models' && req.headers.authorization === 'Bearer local-key' ? json(res, 200, { data: [{ id: 'llama3:8b' }, { id: 'qwen-7b' }] }) : json(res, 401, {}));
    const mapped = { url: modelsUrl, apiKey: 'local-key', modelMap: { 'llama-3-8b': 'llama3:8b' } };
    expect(byName(await runChecks(inputs({ inference: mapped }))).inference).toMatchObject({ ok: true, detail: expect.stringContaining('every declared one') });
    const unmapped = byName(await runChecks(inputs({ inference: { ...mapped, modelMap: {} } }))).inference!;
    expect(unmapped).toMatchObject({ ok: false, detail: expect.stringContaining('does not list llama-3-8b'), fix: expect.stringContaining('SVC_INFERENCE_MODEL_MAP') });
    const down = byName(await runChecks(inputs({ inference: { url: `${gatewayUrl}/nothing-here/v1` } }))).inference!;
    expect(down).toMatchObject({ ok: false, detail: expect.stringContaining('does not answer') });
  });

  it('without agent.json fails every check that needs it, and names the enroll command', async () => {
    dockerH.current = healthyDocker;
    const checks = await runChecks(inputs({ config: { error: 'no agent configuration at /etc/svc-node/agent.json', path: '/etc/svc-node/agent.json' } }));
    expect(checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['config', 'gateway', 'clock', 'node key', 'data dir']);
    expect(formatChecks(checks)).toMatch(/FAIL {2}config +no agent configuration[^\n]*\n +-> sudo svc-node enroll/);
    expect(formatChecks(checks)).toMatch(/5 of 8 checks failed\n$/);
  });
});
