import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { AGENT_VERSION, agentPackages, sh } from './support/agent-package.ts';
import { until } from './support/agent.ts';
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';
import { REAL_IMAGE, SMALL_IMAGE, sandboxImage, tool } from './support/needs.ts';

/**
 * The .deb in a fresh Debian bookworm root: a container of the sandbox image (debootstrap'd bookworm with
 * Debian's own Node.js 18, which the package does not use; no systemd), with `dpkg -i`. It checks the files, owners, modes, user and unit; enrolls the installed agent
 * with a key file, runs it as svc-node against a test gateway on the host (--network host) until the node is
 * online, runs one sandbox through it (the host's Docker socket is mounted; the agent gets its group as the unit
 * gives it the docker group), asks its doctor; then upgrades to a newer build (agent.json kept), removes it
 * (configuration and data kept) and purges it (all gone).
 *
 * Without systemd in the container, the agent is started the way the unit would (as svc-node, with the
 * docker group) and restarted by the test where the unit's try-restart would restart it.
 */
const enabled = tool('dpkg-deb', 'apt-get install dpkg', 'the node agent packages') && sandboxImage(REAL_IMAGE, 'the .deb install into a bookworm root') && sandboxImage(SMALL_IMAGE, 'the sandbox run through the installed agent');
const SOCKET = '/var/run/docker.sock';

let t: TestGateway;
let dir: string;
let container: string;
let nodeId: string;
let api: SvcClient;
let owner: SvcClient;
let debFile: string;

const dexec = (args: string[], env: Record<string, string> = {}) =>
  sh('docker', ['exec', ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]), container, ...args], { timeout: 60_000 });
const inRoot = (script: string) => dexec(['sh', '-c', script]);
const stat = (paths: string[]) => inRoot(`stat -c '%n %U:%G %a %F' ${paths.join(' ')}`).stdout.trim().split('\n');
const exists = (p: string) => inRoot(`test -e ${p} || test -L ${p}`).code === 0;

const AGENT_ENV = { SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '0' };
/** `svc-node run` as the unit runs it: user svc-node, with the group of the Docker socket added. */
function startAgent() {
  const gid = statSync(SOCKET).gid;
  const env = Object.entries(AGENT_ENV).map(([k, v]) => `${k}=${v}`).join(' ');
  const r = sh('docker', ['exec', '-d', container, 'sh', '-c', `echo $$ >/tmp/agent.pid; exec env ${env} setpriv --reuid=svc-node --regid=svc-node --groups=${gid} --inh-caps=-all -- /usr/bin/svc-node run >>/tmp/agent.log 2>&1`]);
  expect(r.code, r.out).toBe(0);
}
async function stopAgent() {
  inRoot('kill -TERM "$(cat /tmp/agent.pid)"');
  await until('the agent to exit', async () => inRoot('kill -0 "$(cat /tmp/agent.pid)" 2>/dev/null').code !== 0, 30_000);
}
const publicNode = async () => ((await (await fetch(`${t.url}/v1/nodes`)).json()) as Array<{ id: string; status?: string }>).find((n) => n.id === nodeId);
const agentLog = () => inRoot('cat /tmp/agent.log').out;

beforeAll(async () => {
  if (!enabled) return;
  debFile = agentPackages().deb;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000', SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const s = await t.signIn();
  owner = s.client;
  await t.gw.services.metering.credit(s.accountId, 1_000_000_000, 'grant', 'deb-tests');
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await owner.createKey({ scopes: ['sandboxes'] })).key } });
  const enrolled = await owner.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'], name: 'deb' } });
  nodeId = enrolled.node.id;
  await new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } }).request('POST', '/v1/admin/nodes/approve', { body: { node_id: nodeId, approved: true } });
  dir = mkdtempSync(join(tmpdir(), 'svc-deb-'));
  writeFileSync(join(dir, 'node.key'), `${enrolled.node_key}\n`, { mode: 0o600 });
  copyFileSync(debFile, join(dir, 'svc-node.deb'));
  copyFileSync(agentPackages().tarball, join(dir, 'svc-node.tar.gz'));
  container = `svc-deb-${randomBytes(4).toString('hex')}`;
  const r = sh('docker', ['run', '-d', '--rm', '--name', container, '--user', 'root', '--network', 'host', '-v', `${dir}:/pkg`, '-v', `${SOCKET}:${SOCKET}`, '--entrypoint', 'sleep', REAL_IMAGE, 'infinity']);
  expect(r.code, r.out).toBe(0);
}, 600_000);
afterAll(async () => {
  if (container) sh('docker', ['rm', '-f', container]);
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!enabled)('the node agent .deb in a fresh Debian root', () => {
  let installStarted: number;

  it('is at most 60 MB, depends only on bookworm packages, recommends docker.io', () => {
    expect(statSync(debFile).size).toBeLessThanOrEqual(60 * 1024 * 1024);
    expect(sh('dpkg-deb', ['-f', debFile, 'Package', 'Version', 'Depends', 'Recommends']).stdout).toBe(
      `Package: svc-node\nVersion: ${AGENT_VERSION.replace('-', '~')}\nDepends: libc6 (>= 2.28), libstdc++6, libgcc-s1, passwd\nRecommends: docker.io\n`,
    );
  });

  it('installs with dpkg -i: files, owners, modes, the svc-node user and the unit', () => {
    installStarted = performance.now();
    const r = dexec(['dpkg', '-i', '/pkg/svc-node.deb']);
    expect(r.code, r.out).toBe(0);
    // No docker group in this root: postinst says so and clears the unit's SupplementaryGroups=docker.
    expect(r.out).toContain('no docker group on this host');
    expect(stat(['/opt/svc-node', '/opt/svc-node/runtime/node', '/opt/svc-node/dist/svc-node.js', '/etc/svc-node', '/var/lib/svc-node', '/lib/systemd/system/svc-node.service'])).toEqual([
      '/opt/svc-node root:root 755 directory',
      '/opt/svc-node/runtime/node root:root 755 regular file',
      '/opt/svc-node/dist/svc-node.js root:root 644 regular file',
      '/etc/svc-node svc-node:svc-node 700 directory',
      '/var/lib/svc-node svc-node:svc-node 700 directory',
      '/lib/systemd/system/svc-node.service root:root 644 regular file',
    ]);
    expect(inRoot('readlink /usr/bin/svc-node').stdout.trim()).toBe('../../opt/svc-node/bin/svc-node');
    const [, , uid, , , home, shell] = inRoot('getent passwd svc-node').stdout.trim().split(':');
    expect({ system: Number(uid) < 1000, home, shell }).toEqual({ system: true, home: '/var/lib/svc-node', shell: '/usr/sbin/nologin' });
    const unit = inRoot('cat /lib/systemd/system/svc-node.service').stdout.split('\n');
    for (const line of ['User=svc-node', 'ExecStart=/usr/bin/svc-node run', 'SupplementaryGroups=docker', 'SystemCallFilter=@system-service', 'PrivateDevices=yes', 'ProtectProc=invisible']) expect(unit).toContain(line);
    expect(inRoot('cat /etc/systemd/system/svc-node.service.d/10-no-docker.conf').stdout).toContain('SupplementaryGroups=\n');
    expect(dexec(['svc-node', '--version']).stdout).toBe(`${AGENT_VERSION}\n`);
  });

  it('enrolls from a key file into a 0600 agent.json the svc-node user owns, and comes online', async () => {
    const e = dexec(['svc-node', 'enroll', '--url', t.url, '--key-file', '/pkg/node.key']);
    expect(e.code, e.out).toBe(0);
    expect(stat(['/etc/svc-node/agent.json'])).toEqual(['/etc/svc-node/agent.json svc-node:svc-node 600 regular file']);
    expect(JSON.parse(inRoot('cat /etc/svc-node/agent.json').stdout)).toMatchObject({ url: t.url, data_dir: '/var/lib/svc-node' });
    startAgent();
    await until('the installed agent online in GET /v1/nodes', async () => (await publicNode())?.status === 'online' && t.gw.fleet.hub.isConnected(nodeId), 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${agentLog()}`);
    });
    // Informational (no timing assertion): clean root + .deb + node key to an online node.
    console.log(`agent-deb: dpkg -i, enroll and start to online in ${Math.round(performance.now() - installStarted)} ms`);
    const rss = inRoot('grep VmRSS /proc/"$(cat /tmp/agent.pid)"/status').stdout.trim();
    console.log(`agent-deb: installed agent ${rss}`);
  }, 60_000);

  it('runs a sandbox through the installed agent and the host\'s Docker engine', async () => {
    const run = await api.request<{ exit_code: number; stdout: string; node_id?: string }>('POST', '/v1/sandboxes', { body: { language: 'sh', code: 'echo from-the-package' } });
    expect(run).toMatchObject({ exit_code: 0, stdout: 'from-the-package\n' });
  }, 60_000);

  it('passes every doctor check', async () => {
    // Not spawnSync: the gateway answering the doctor runs in this process.
    const r = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const p = spawn('docker', ['exec', ...Object.entries(AGENT_ENV).flatMap(([k, v]) => ['-e', `${k}=${v}`]), container, 'svc-node', 'doctor', '--json']);
      let stdout = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.on('exit', (code) => resolve({ code, stdout }));
    });
    const report = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ name: string; ok: boolean; detail: string }> };
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.code).toBe(0);
  });

  it('upgrades to a newer build keeping agent.json, and the restarted agent reports the new version', async () => {
    const newer = `${AGENT_VERSION}+upgrade1`;
    const root = join(dir, 'newer');
    expect(sh('dpkg-deb', ['-R', debFile, root]).code).toBe(0);
    const control = join(root, 'DEBIAN', 'control');
    writeFileSync(control, readFileSync(control, 'utf8').replace(/^Version: .*$/m, `Version: ${newer.replace('-', '~')}`));
    const pkg = join(root, 'opt', 'svc-node', 'package.json');
    writeFileSync(pkg, JSON.stringify({ ...JSON.parse(readFileSync(pkg, 'utf8')), version: newer }));
    expect(sh('dpkg-deb', ['--root-owner-group', '-Znone', '-b', root, join(dir, 'newer.deb')]).code).toBe(0);
    await stopAgent();
    const before = inRoot('cat /etc/svc-node/agent.json').stdout;
    expect(JSON.parse(before)).toMatchObject({ node_id: nodeId }); // the agent recorded its id after the first heartbeat
    // Docker installed since: the upgrade drops the drop-in that cleared the docker group.
    expect(inRoot('groupadd --system docker').code).toBe(0);
    const r = dexec(['dpkg', '-i', '/pkg/newer.deb']);
    expect(r.code, r.out).toBe(0);
    expect(inRoot('cat /etc/svc-node/agent.json').stdout).toBe(before);
    expect(stat(['/etc/svc-node/agent.json'])).toEqual(['/etc/svc-node/agent.json svc-node:svc-node 600 regular file']);
    expect(exists('/etc/systemd/system/svc-node.service.d/10-no-docker.conf')).toBe(false);
    expect(dexec(['svc-node', '--version']).stdout).toBe(`${newer}\n`);
    startAgent();
    await until('the upgraded agent online with its new version', async () => {
      const mine = await owner.request<Array<{ id: string; agent_version: string | null; status: string }>>('GET', '/v1/nodes/mine');
      const me = mine.find((n) => n.id === nodeId);
      return me?.status === 'online' && me.agent_version === newer && t.gw.fleet.hub.isConnected(nodeId);
    }, 30_000);
    await stopAgent();
  }, 60_000);

  it('remove keeps agent.json and the data; purge deletes them and the svc-node user', () => {
    inRoot('echo kept >/var/lib/svc-node/snapshot-marker');
    const agentJson = inRoot('cat /etc/svc-node/agent.json').stdout;
    const removed = dexec(['dpkg', '-r', 'svc-node']);
    expect(removed.code, removed.out).toBe(0);
    for (const p of ['/opt/svc-node', '/usr/bin/svc-node', '/lib/systemd/system/svc-node.service']) expect(exists(p), p).toBe(false);
    expect(inRoot('cat /etc/svc-node/agent.json').stdout).toBe(agentJson);
    expect(inRoot('cat /var/lib/svc-node/snapshot-marker').stdout).toBe('kept\n');
    expect(inRoot("dpkg-query -W -f='${Status}' svc-node").stdout).toBe('deinstall ok config-files');

    const purged = dexec(['dpkg', '-P', 'svc-node']);
    expect(purged.code, purged.out).toBe(0);
    for (const p of ['/etc/svc-node', '/var/lib/svc-node', '/etc/systemd/system/svc-node.service.d']) expect(exists(p), p).toBe(false);
    expect(inRoot('getent passwd svc-node').code).not.toBe(0);
    expect(inRoot('getent group svc-node').code).not.toBe(0);
    expect(inRoot('dpkg-query -W svc-node').code).not.toBe(0);
  });

  it('after the purge, the tarball installs in the same root with its install.sh, the key from a file', () => {
    // (This root's /opt went with the package: no other package of the image owns it.)
    expect(inRoot('mkdir -p /opt && tar -xzf /pkg/svc-node.tar.gz -C /opt').code).toBe(0);
    const r = dexec(['/opt/svc-node/install.sh', '--url', t.url, '--key-file', '/pkg/node.key']);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('systemd is not running here');
    expect(r.out).not.toContain(readFileSync(join(dir, 'node.key'), 'utf8').trim());
    expect(inRoot('readlink /usr/local/bin/svc-node').stdout.trim()).toBe('/opt/svc-node/bin/svc-node');
    expect(stat(['/etc/svc-node', '/etc/svc-node/agent.json', '/var/lib/svc-node', '/etc/systemd/system/svc-node.service'])).toEqual([
      '/etc/svc-node svc-node:svc-node 700 directory',
      '/etc/svc-node/agent.json svc-node:svc-node 600 regular file',
      '/var/lib/svc-node svc-node:svc-node 700 directory',
      '/etc/systemd/system/svc-node.service root:root 644 regular file',
    ]);
    expect(inRoot('cat /etc/systemd/system/svc-node.service').stdout).toBe(readFileSync(join(fileURLToPath(new URL('..', import.meta.url)), 'installers', 'node-agent', 'svc-node.service'), 'utf8'));
    expect(dexec(['svc-node', '--version']).stdout).toBe(`${AGENT_VERSION}\n`);
  });
});
