import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, dockerAvailable, imageExists } from './support/docker.ts';
import { expectOneLineError, svc as runSvc, type CliRun } from './support/cli.ts';

/**
 * `svc run`: a one-shot sandbox run through the real CLI, against a real control plane, a real svc-node
 * agent and a real Docker engine (the small busybox image). Output streams as it comes; the program's exit
 * code is the CLI's.
 */
const enabled = dockerAvailable() && imageExists(SMALL_IMAGE);
if (!enabled) console.warn(`svc run tests skipped: Docker engine or image ${SMALL_IMAGE} missing (.ci/run builds it: installers/sandbox-image/build.sh --small)`);

let t: TestGateway;
let agent: TestAgent;
let key: string;
let tmp: string;
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-run-'));
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000', SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'cli-run-tests');
  key = (await owner.client.createKey({ scopes: ['sandboxes'] })).key;
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until('sandbox agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[], opts: { input?: string; key?: string | null } = {}): Promise<CliRun> =>
  runSvc(args, { dir: join(tmp, 'config'), url: t.url, input: opts.input, env: opts.key === null ? {} : { SVC_KEY: opts.key ?? key } });

describe.skipIf(!enabled)('svc run', () => {
  it("passes the program's exit code through, its stdout to stdout and its stderr to stderr, then the receipt", async () => {
    const r = await svc(['run', '-c', 'echo hi; echo oops >&2; exit 3']);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toBe('hi\n');
    expect(r.stderr).toMatch(/^oops$/m);
    expect(r.stderr).toMatch(/^exit 3 {2}\d+\.\d\d s {2}receipt \S+ {2}cost \$\d+\.\d+$/m);
    const ok = await svc(['run', '-c', 'true']);
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('streams output as the program writes it', async () => {
    // The program paces itself; the CLI must print each line when it comes, not at the end.
    const r = await svc(['run', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.4; done']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('line1\nline2\nline3\n');
    expect(r.chunks.length).toBeGreaterThanOrEqual(2);
    expect(r.exitedAt - r.chunks[0]!.at).toBeGreaterThan(500);
  });

  it('runs a file (language from its extension) or code on stdin, with environment variables', async () => {
    const script = join(tmp, 'hello.sh');
    writeFileSync(script, 'echo "from a file: $GREETING"\nexit 7\n');
    const [file, stdin] = await Promise.all([svc(['run', script, '-e', 'GREETING=hello']), svc(['run', '-'], { input: 'echo from stdin; exit 0\n' })]);
    expect(file.code, file.stderr).toBe(7);
    expect(file.stdout).toBe('from a file: hello\n');
    expect(stdin.code, stdin.stderr).toBe(0);
    expect(stdin.stdout).toBe('from stdin\n');
  });

  it('--json: one object with the output, the exit code and a receipt that verifies offline', async () => {
    const r = await svc(['run', '--json', '-c', 'echo out; echo err >&2; exit 5']);
    expect(r.code, r.stderr).toBe(5);
    const out = JSON.parse(r.stdout) as { exit_code: number; stdout: string; stderr: string; status: string; receipt: { id: string; canonical: string } };
    expect(out).toMatchObject({ exit_code: 5, stdout: 'out\n', stderr: 'err\n', status: 'failed' });
    const file = join(tmp, 'run.json');
    writeFileSync(file, r.stdout);
    const v = await svc(['receipts', 'verify', file, '--signer', t.gw.services.signer.address]);
    expect(v.code, v.stderr).toBe(0);
    expect(JSON.parse(v.stdout)).toMatchObject({ id: out.receipt.id, kind: 'sandbox', detail: { exit_code: 5 } });
  });

  it('a run killed at its time limit exits 124', async () => {
    const r = await svc(['run', '--timeout', '1', '-c', 'echo started; sleep 30']);
    expect(r.code, r.stderr).toBe(124);
    expect(r.stdout).toBe('started\n');
    expect(r.stderr).toMatch(/^killed at its time limit \(exit 124\)/m);
  });

  it('refusals: no key (exit 4), nothing or two things to run (exit 2), a missing file (exit 2)', async () => {
    const [noKey, nothing, both, missing] = await Promise.all([
      svc(['run', '-c', 'true'], { key: null }),
      svc(['run']),
      svc(['run', 'x.sh', '-c', 'true']),
      svc(['run', join(tmp, 'nope.sh')]),
    ]);
    expectOneLineError(noKey, 4, /^error: no API key given; set SVC_KEY/);
    expectOneLineError(nothing, 2, /^error: nothing to run; pass a FILE \(- for stdin\) or -c CODE$/);
    expectOneLineError(both, 2, /^error: give a file or -c, not both/);
    expectOneLineError(missing, 2, /^error: cannot read code file .*nope\.sh: no such file or directory$/);
  });
});
