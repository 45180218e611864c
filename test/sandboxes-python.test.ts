import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { REAL_IMAGE, sandboxImage } from './support/needs.ts';

/** Python in the real sandbox image (built by installers/sandbox-image/build.sh), through the whole stack. */
const enabled = sandboxImage(REAL_IMAGE);

let t: TestGateway;
let agent: TestAgent;
let api: SvcClient;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway();
  const owner = await t.signIn();
  const key = await owner.client.createKey({ scopes: ['sandboxes'] });
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: REAL_IMAGE });
  await until('agent', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
});

describe.skipIf(!enabled)('the real sandbox image', () => {
  it('runs Python and Node with stdin and files', async () => {
    const py = await api.request<{ stdout: string; exit_code: number }>('POST', '/v1/sandboxes', {
      body: { language: 'python', code: 'import sys, json\nprint(json.dumps({"sum": sum(range(10)), "in": sys.stdin.read().strip(), "f": open("data.txt").read()}))', stdin: 'piped', files: [{ path: 'data.txt', content: 'from a file' }] },
    });
    expect(py.exit_code).toBe(0);
    expect(JSON.parse(py.stdout)).toEqual({ sum: 45, in: 'piped', f: 'from a file' });
    const node = await api.request<{ stdout: string }>('POST', '/v1/sandboxes', { body: { language: 'node', code: 'console.log(process.version.startsWith("v"), 6 * 7)' } });
    expect(node.stdout).toBe('true 42\n');
  });
});
