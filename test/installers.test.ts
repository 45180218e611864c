import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from './support/needs.ts';

/**
 * The installers, run for real: shellcheck on every script, the node-agent installer into a temporary root
 * (--prefix), the installed agent started from there, and systemd-analyze on the units.
 * CI needs shellcheck (Debian package `shellcheck`) and systemd-analyze (package `systemd`); elsewhere
 * systemd-analyze is used when present.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const INSTALLERS = join(ROOT, 'installers');
const INSTALL = join(INSTALLERS, 'node-agent', 'install.sh');
const HARDENING = [
  'User=svc-node',
  'Restart=on-failure',
  'Environment=SVC_NODE_CONFIG_DIR=/etc/svc-node',
  'ExecStart=/usr/local/bin/svc-node run',
  'NoNewPrivileges=yes',
  'ProtectSystem=strict',
  'ProtectHome=yes',
  'PrivateTmp=yes',
  'ReadWritePaths=/var/lib/svc-node /etc/svc-node',
  'SystemCallFilter=@system-service',
  'ProtectClock=yes',
  'PrivateDevices=yes',
  'ProtectProc=invisible',
  'CapabilityBoundingSet=',
  'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6',
  'SystemCallArchitectures=native',
  'LockPersonality=yes',
  'RestrictSUIDSGID=yes',
  'ProtectKernelTunables=yes',
  'ProtectKernelModules=yes',
  'ProtectControlGroups=yes',
  'UMask=0077',
  'SupplementaryGroups=docker',
];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function sh(cmd: string, args: string[], env: Record<string, string> = {}, timeout = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    // A clean environment: only PATH and HOME, so nothing (SVC_NODE_KEY above all) leaks in from the runner.
    execFile(cmd, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...env }, timeout }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}
const install = (args: string[], env: Record<string, string> = {}) => sh('bash', [INSTALL, ...args], env);

const has = (cmd: string) => {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/** Installs a Debian package when the tool is missing and apt is usable (root); true when the tool is there. */
function ensureTool(cmd: string, pkg: string): boolean {
  if (has(cmd)) return true;
  if (process.getuid?.() !== 0 || !has('apt-get')) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const apt = (args: string[]) => execFileSync('apt-get', args, { stdio: 'ignore', env, timeout: 300_000 });
  try {
    apt(['install', '-y', '-qq', '--no-install-recommends', pkg]);
  } catch {
    try {
      apt(['update', '-qq']);
      apt(['install', '-y', '-qq', '--no-install-recommends', pkg]);
    } catch {
      return false;
    }
  }
  return has(cmd);
}

/** Every regular file under dir (symlinks are not followed). */
function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

const mode = (p: string) => statSync(p).mode & 0o777;
const newKey = () => `nk-svc_test${randomBytes(30).toString('base64url').slice(0, 39)}`;

let tmp: string;
let prefix: string;
let key: string;
let keyFile: string;
let first: Run;

beforeAll(async () => {
  if (!ensureTool('shellcheck', 'shellcheck')) {
    throw new Error('shellcheck is not installed and could not be installed here: run `apt-get install -y shellcheck` (CI: add it to .ci/run)');
  }
  ensureTool('systemd-analyze', 'systemd');
  tmp = mkdtempSync(join(tmpdir(), 'svc-installers-'));
  prefix = join(tmp, 'root');
  key = newKey();
  keyFile = join(tmp, 'node.key');
  writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
  first = await install(['--prefix', prefix, '--url', 'http://127.0.0.1:9', '--key-file', keyFile]);
}, 360_000);
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('shell scripts', () => {
  it('every installers/**/*.sh and the package\'s maintainer scripts pass shellcheck', async () => {
    const scripts = walk(INSTALLERS).filter((f) => f.endsWith('.sh') || /\/package\/(postinst|prerm|postrm)$/.test(f));
    expect(scripts.map((f) => relative(ROOT, f))).toEqual(expect.arrayContaining(['installers/node-agent/install.sh', 'installers/node-agent/package/install.sh', 'installers/node-agent/package/postinst', 'installers/node-agent/package/prerm', 'installers/node-agent/package/postrm']));
    const r = await sh('shellcheck', ['--external-sources', ...scripts]);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});

describe('node-agent install.sh into a temporary root', () => {
  const at = (p: string) => join(prefix, p);

  it('installs, never printing the key', () => {
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/skipping the svc-node system user under --prefix/);
    expect(first.stdout).toMatch(/not starting: installed under --prefix/);
    expect(first.stdout + first.stderr).not.toContain(key);
    expect(first.stdout + first.stderr).not.toContain(key.slice(14));
  });

  it('writes agent.json through the agent\'s own enroll: 0600 in a 0700 directory, pointing at the prefixed data dir', () => {
    const cfg = JSON.parse(readFileSync(at('etc/svc-node/agent.json'), 'utf8')) as Record<string, unknown>;
    expect(cfg).toEqual({ url: 'http://127.0.0.1:9', node_key: key, node_id: null, data_dir: at('var/lib/svc-node'), endpoint: null });
    expect(mode(at('etc/svc-node/agent.json'))).toBe(0o600);
    expect(mode(at('etc/svc-node'))).toBe(0o700);
    expect(mode(at('var/lib/svc-node'))).toBe(0o700);
    expect(readdirSync(at('etc/svc-node'))).toEqual(['agent.json']);
  });

  it('copies only the built agent and its run-time closure, read-only to the agent, without sources, tests or dev tools', () => {
    const opt = at('opt/svc-node');
    expect(readdirSync(opt).sort()).toEqual(['INSTALL-INFO', 'node-agent', 'node_modules']);
    expect(readdirSync(join(opt, 'node-agent')).sort()).toEqual(['bin', 'dist', 'package.json']);
    const modules = readdirSync(join(opt, 'node_modules'));
    for (const m of ['commander', 'ws', 'zod', 'systeminformation', '@trpc', 'node-pty', 'secp256k1']) expect(modules).toContain(m);
    for (const m of ['tsx', 'esbuild', '@svc', 'vitest', 'typescript', 'fastify', '@electric-sql', 'solc', 'ethers', '@types']) expect(modules).not.toContain(m);
    // node-pty: its JavaScript and the addon compiled for Linux, not its sources or other platforms' binaries.
    expect(readdirSync(join(opt, 'node_modules', 'node-pty')).sort()).toEqual(expect.arrayContaining(['build', 'lib', 'package.json']));
    for (const d of ['prebuilds', 'deps', 'third_party', 'src']) expect(readdirSync(join(opt, 'node_modules', 'node-pty'))).not.toContain(d);
    const files = walk(opt);
    expect(files.reduce((n, f) => n + statSync(f).size, 0)).toBeLessThan(60 * 1024 * 1024);
    expect(files.filter((f) => f.includes('/node-agent/') && /\.ts$/.test(f))).toEqual([]);
    expect(files.filter((f) => (statSync(f).mode & 0o022) !== 0)).toEqual([]);
  });

  it('writes an executable wrapper that runs the installed agent on its own (--help, status)', async () => {
    const bin = at('usr/local/bin/svc-node');
    expect(mode(bin) & 0o111).toBe(0o111);
    const help = await sh(bin, ['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^\s+enroll \[options\]/m);
    expect(help.stdout).toMatch(/^\s+run\s/m);
    // The wrapper defaults the config dir to the installed one; the explicit variable works the same.
    for (const env of [{}, { SVC_NODE_CONFIG_DIR: at('etc/svc-node') }] as Record<string, string>[]) {
      const status = await sh(bin, ['status'], env);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain('control plane: http://127.0.0.1:9');
      expect(status.stdout).toContain(`data dir: ${at('var/lib/svc-node')}`);
      expect(status.stdout).toContain('control plane: unreachable');
      expect(status.stdout).not.toContain(key);
    }
  });

  it('installs the hardened unit verbatim, without the key', () => {
    const unit = readFileSync(at('etc/systemd/system/svc-node.service'), 'utf8');
    expect(unit).toBe(readFileSync(join(INSTALLERS, 'node-agent', 'svc-node.service'), 'utf8'));
    const lines = unit.split('\n').map((l) => l.trim());
    for (const h of HARDENING) expect(lines, h).toContain(h);
    expect(unit).toMatch(/docker group .*root-equivalent/s);
    expect(unit).not.toContain('nk-svc_');
    expect(mode(at('etc/systemd/system/svc-node.service'))).toBe(0o644);
  });

  it('leaves the key in agent.json and nowhere else under the prefix', () => {
    const holders = walk(prefix).filter((f) => readFileSync(f).includes(key));
    expect(holders.map((f) => relative(prefix, f))).toEqual(['etc/svc-node/agent.json']);
  });

  it('reinstalls over an install: without a key it keeps agent.json; SVC_NODE_KEY re-enrolls', async () => {
    const before = readFileSync(at('etc/svc-node/agent.json'), 'utf8');
    const keep = await install(['--prefix', prefix]);
    expect(keep.code, keep.stderr).toBe(0);
    expect(keep.stdout).toMatch(/keeping the existing .*agent\.json/);
    expect(readFileSync(at('etc/svc-node/agent.json'), 'utf8')).toBe(before);
    const moved = await install(['--prefix', prefix, '--url', 'http://127.0.0.1:10']);
    expect(moved.code).toBe(2);
    expect(moved.stderr).toMatch(/needs the node key again/);

    const other = newKey();
    const r = await install(['--prefix', prefix, '--url', 'https://gateway.example/'], { SVC_NODE_KEY: other });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(other);
    expect(JSON.parse(readFileSync(at('etc/svc-node/agent.json'), 'utf8'))).toMatchObject({ url: 'https://gateway.example', node_key: other });
    expect(mode(at('etc/svc-node/agent.json'))).toBe(0o600);
    expect(walk(prefix).filter((f) => readFileSync(f).includes(other)).map((f) => relative(prefix, f))).toEqual(['etc/svc-node/agent.json']);
    expect(readdirSync(at('opt')).sort()).toEqual(['svc-node']);
  }, 120_000);

  it('passes systemd-analyze verify (both units)', async (ctx) => {
    // Installed above when it can be; without it this check is skipped (named at the end of the run), or fails under CI.
    if (!tool('systemd-analyze', 'apt-get install systemd (.ci/run installs it)', 'systemd-analyze verify of the units')) ctx.skip();
    // verify checks that ExecStart exists: point the copies at the installed wrapper and this node binary.
    const dir = join(tmp, 'units');
    mkdirSync(dir, { recursive: true });
    const agent = readFileSync(at('etc/systemd/system/svc-node.service'), 'utf8').replace('ExecStart=/usr/local/bin/svc-node', `ExecStart=${at('usr/local/bin/svc-node')}`);
    const gateway = readFileSync(join(INSTALLERS, 'control-plane', 'svc-gateway.service'), 'utf8').replace('ExecStart=/usr/bin/node', `ExecStart=${process.execPath}`);
    writeFileSync(join(dir, 'svc-node.service'), agent);
    writeFileSync(join(dir, 'svc-gateway.service'), gateway);
    for (const unit of ['svc-node.service', 'svc-gateway.service']) {
      const r = await sh('systemd-analyze', ['verify', join(dir, unit)], { SYSTEMD_LOG_COLOR: '0' });
      // systemd before 254 does not know the restart backoff keys and ignores them (the unit says so).
      const problems = (r.stdout + r.stderr).split('\n').filter((l) => l.trim() && !/Unknown key '(RestartSteps|RestartMaxDelaySec)'/.test(l));
      expect({ unit, problems }).toEqual({ unit, problems: [] });
      expect(r.code).toBe(0);
    }
  });

  it('rates the agent unit at most 1.5 in systemd-analyze security (3.7 before its sandboxing lines)', async (ctx) => {
    if (!tool('systemd-analyze', 'apt-get install systemd (.ci/run installs it)', 'systemd-analyze security of the agent unit')) ctx.skip();
    const r = await sh('systemd-analyze', ['security', '--offline=yes', join(INSTALLERS, 'node-agent', 'svc-node.service')], { SYSTEMD_LOG_COLOR: '0' });
    const score = Number(/Overall exposure level for svc-node\.service: ([\d.]+)/.exec(r.stdout + r.stderr)?.[1]);
    expect(score).toBeLessThanOrEqual(1.5);
  });
});

describe('node-agent install.sh refusals', () => {
  const fresh = () => {
    const p = mkdtempSync(join(tmp, 'p-'));
    return p;
  };

  it('--dry-run prints the plan and writes nothing', async () => {
    const p = fresh();
    const r = await install(['--dry-run', '--prefix', p, '--url', 'http://127.0.0.1:9', '--key-file', keyFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/dry run: nothing is written/);
    expect(r.stdout).toMatch(/would run: SVC_NODE_KEY=<the key> .*svc-node enroll/);
    expect(r.stdout).toMatch(/would copy node-agent/);
    // The service-user step is in the plan even under --prefix (where it is not run).
    expect(r.stdout).toMatch(/^ {4}an install into \/ would run: useradd --system --user-group --home-dir \/var\/lib\/svc-node .*--shell \/usr\/sbin\/nologin .* svc-node$/m);
    expect(r.stdout + r.stderr).not.toContain(key);
    expect(readdirSync(p)).toEqual([]);
  });

  it('refuses without a key, with a clear message and nothing written', async () => {
    const p = fresh();
    const r = await install(['--prefix', p, '--url', 'http://127.0.0.1:9']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no node key: give --key-file <path> .* or set SVC_NODE_KEY/);
    expect(r.stdout).toBe('');
    expect(readdirSync(p)).toEqual([]);
  });

  it('refuses a malformed key without echoing it', async () => {
    const p = fresh();
    const bad = ['sk-svc_' + 'a'.repeat(43), 'nk-svc_short', `nk-svc_${'a'.repeat(20)} ${'b'.repeat(22)}`, `nk-svc_${'a'.repeat(42)}$`];
    for (const content of bad) {
      const f = join(tmp, 'bad.key');
      writeFileSync(f, content, { mode: 0o600 });
      const r = await install(['--prefix', p, '--url', 'http://127.0.0.1:9', '--key-file', f]);
      expect({ content, code: r.code }).toEqual({ content, code: 2 });
      expect(r.stderr).toMatch(/does not hold a node key \(nk-svc_ followed by 43 base64url characters/);
      expect(r.stdout + r.stderr).not.toContain(content.slice(7, 20));
    }
    const env = await install(['--prefix', p, '--url', 'http://127.0.0.1:9'], { SVC_NODE_KEY: 'nk-svc_nope' });
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/the SVC_NODE_KEY does not hold a node key/);
    expect(readdirSync(p)).toEqual([]);
  });

  it('refuses the key as an argument, a missing key file, a bad URL and unknown options', async () => {
    const p = fresh();
    const cases: Array<[string[], RegExp]> = [
      [['--key', key, '--url', 'http://127.0.0.1:9'], /not taken as an argument: every user on this host can read arguments \(ps/],
      [[`--key=${key}`, '--url', 'http://127.0.0.1:9'], /not taken as an argument/],
      [['--key-file', join(tmp, 'missing.key'), '--url', 'http://127.0.0.1:9'], /cannot read key file .*missing\.key/],
      [['--key-file', keyFile], /--url <control-plane origin> is required/],
      [['--key-file', keyFile, '--url', 'ftp://gateway'], /--url must be an http\(s\) origin/],
      [['--key-file', keyFile, '--url', 'https://gateway.example/v1/nodes'], /--url must be an http\(s\) origin/],
      [['--frobnicate'], /unknown argument: --frobnicate/],
    ];
    for (const [args, message] of cases) {
      const r = await install(['--prefix', p, ...args]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stdout + r.stderr).not.toContain(key.slice(14));
    }
    expect(readdirSync(p)).toEqual([]);
    expect(existsSync(join(p, 'etc'))).toBe(false);
  });

  it('warns about a key file other users can read', async () => {
    const loose = join(tmp, 'loose.key');
    writeFileSync(loose, key, { mode: 0o644 });
    const r = await install(['--dry-run', '--prefix', fresh(), '--url', 'http://127.0.0.1:9', '--key-file', loose]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/loose\.key is readable by other users \(mode 644\); chmod 600 it/);
  });
});
