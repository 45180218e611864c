import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startSandboxAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { SvcClient } from '@svc/shared/client';
import { expectOneLineError, startSvc, svc as runSvc, type CliRun } from './support/cli.ts';

/**
 * `svc run`: a one-shot sandbox run through the real CLI, against a real control plane, a real svc-node
 * agent and a real Docker engine (the small busybox image). Output streams as it comes; the program's exit
 * code is the CLI's.
 */
const enabled = sandboxImage();

let t: TestGateway;
let agent: TestAgent;
let key: string;
let owner: SvcClient;
let tmp: string;
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-run-'));
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000', SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const signedIn = await t.signIn();
  owner = signedIn.client;
  await t.gw.services.metering.credit(signedIn.accountId, 1_000_000_000, 'grant', 'cli-run-tests');
  key = (await owner.createKey({ scopes: ['sandboxes'] })).key;
  agent = await startSandboxAgent(t, owner);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[], opts: { input?: string; key?: string | null; onStdout?: (sofar: string) => void } = {}): Promise<CliRun> =>
  runSvc(args, { dir: join(tmp, 'config'), url: t.url, input: opts.input, onStdout: opts.onStdout, env: opts.key === null ? {} : { SVC_KEY: opts.key ?? key } });

/** Creates `path` in every running container of this file's agent (the run's box among them). */
async function touchInAgentBoxes(path: string): Promise<void> {
  const ids = (await docker(['ps', '-q', '--filter', `label=svc.agent.pid=${agent.pid()}`])).split('\n').filter(Boolean);
  expect(ids.length).toBeGreaterThan(0);
  for (const id of ids) await docker(['exec', id, 'touch', path]).catch(() => undefined); // a warm box may be gone meanwhile
}
const docker = (args: string[]) => promisify(execFile)('docker', args, { encoding: 'utf8' }).then((r) => r.stdout);

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
    // The program prints a line, then waits until the test has seen that line on the CLI's stdout (the test then
    // creates a file in the program's container): the second line is written only after the first was printed.
    const go = `/tmp/go-${randomBytes(6).toString('hex')}`;
    let released: Promise<void> | undefined;
    const r = await svc(['run', '-c', `echo line1; i=0; while [ ! -e ${go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo line2`], {
      onStdout: (sofar) => void (sofar.includes('line1\n') && (released ??= touchInAgentBoxes(go))),
    });
    await released;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('line1\nline2\n');
    expect(r.chunks[0]!.text).toBe('line1\n');
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

  it('Ctrl-C after the first output stops the run: one line names its receipt, exit 130, and the seconds it ran are charged', async () => {
    const cli = startSvc(['run', '-c', 'echo start; sleep 120; echo end', '--timeout', '150'], { dir: join(tmp, 'config'), url: t.url, env: { SVC_KEY: key } });
    await until('the program started', async () => cli.stdout().includes('start\n'));
    cli.kill('SIGINT');
    const r = await cli.done;
    expect({ code: r.code, stdout: r.stdout }, r.stderr).toEqual({ code: 130, stdout: 'start\n' });
    const id = /^interrupted: the run was stopped in the sandbox and is charged for the seconds it ran: receipt (req_\w+) /m.exec(r.stderr)?.[1];
    expect(id, r.stderr).toBeDefined();
    const db = t.gw.database.db;
    const event = await until('the interrupted run settled', () => db.selectFrom('usage_events').selectAll().where('request_id', '=', id!).executeTakeFirst(), 60_000);
    const receipt = await owner.request<{ payload: { cost_micro_usd: number; detail: Record<string, unknown> } }>('GET', `/v1/receipts/${id}`);
    expect(receipt.payload).toMatchObject({ cost_micro_usd: Number(event.cost_micro_usd), detail: { outcome: 'client_disconnected', exit_code: null } });
    // 1,000 micro-USD a second: one a millisecond of what ran.
    expect(Number(event.cost_micro_usd)).toBe(Math.max(1, receipt.payload.detail.duration_ms as number));
  });

  it('a run refused before it starts (a spend cap) exits 5 with the refusal, printing nothing of a run', async () => {
    const capped = (await owner.createKey({ scopes: ['sandboxes'], spend_cap_micro_usd: 1 })).key;
    const r = await svc(['run', '-c', 'echo never'], { key: capped });
    expectOneLineError(r, 5, /^error: spend_cap_reached: /);
  });
});
