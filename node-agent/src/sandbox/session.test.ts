import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FILE_BYTES, SANDBOX_JOBS, type ExecResult } from '@svc/shared';
import { startSandbox, type Sandbox } from './index.ts';
import { call, cancelOn, capture, docker, LIMITS, sandboxImage, SMALL_IMAGE, tempDataDir } from './testkit.ts';

const up = sandboxImage();
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

describe.skipIf(!up)('sandbox sessions, files and snapshots against the real Docker engine', () => {
  let sb: Sandbox;
  let n = 0;
  const sid = () => `sess_test_${process.pid}_${++n}`;
  const h = (kind: keyof typeof SANDBOX_JOBS) => sb.handlers[SANDBOX_JOBS[kind]];
  const create = (session_id: string, extra: Record<string, unknown> = {}) =>
    call<{ container_id: string; image_digest: string }>(h('sessionCreate'), { session_id, limits: LIMITS, idle_timeout_ms: 60_000, ...extra });
  const exec = (session_id: string, code: string, extra: Record<string, unknown> = {}) =>
    call<ExecResult>(h('sessionExec'), { session_id, language: 'sh', code, timeout_ms: 10_000, ...extra });
  const write = (session_id: string, path: string, content: string | Buffer) => call(h('fileWrite'), { session_id, path, content_b64: b64(content) });
  const read = async (session_id: string, path: string) => {
    const r = await call<{ content_b64: string; bytes: number }>(h('fileRead'), { session_id, path });
    return Buffer.from(r.content_b64, 'base64').toString('utf8');
  };
  const list = (session_id: string, path: string) =>
    call<{ path: string; entries: Array<{ name: string; type: string; size: number; mtime: string }> }>(h('fileList'), { session_id, path });
  const stop = (session_id: string) => call<{ stopped: boolean }>(h('sessionStop'), { session_id });

  beforeAll(async () => {
    const s = await startSandbox({ image: SMALL_IMAGE, poolSize: 0, dataDir: tempDataDir(), log: () => undefined });
    if ('unavailable' in s) throw new Error(s.unavailable);
    sb = s;
    await sb.ready;
  });
  afterAll(async () => {
    await sb?.stop();
  });

  it('keeps a workspace between execs; two sessions cannot see each other\'s files', async () => {
    const [a, b] = [sid(), sid()];
    const ca = await create(a, { env: { WHO: 'session-a' } });
    const cb = await create(b);
    expect(ca.container_id).not.toBe(cb.container_id);
    await exec(a, 'echo "$WHO secret" > mine.txt');
    expect((await exec(a, 'cat mine.txt')).stdout).toBe('session-a secret\n');
    expect((await exec(a, 'tr a-z A-Z', { stdin: 'piped in' })).stdout).toBe('PIPED IN');
    const other = await exec(b, 'ls -A /workspace; cat /workspace/mine.txt 2>&1; echo exit=$?');
    expect(other.stdout).not.toContain('secret');
    expect(other.stdout).toContain('exit=1');
    await expect(read(b, 'mine.txt')).rejects.toThrow(/sandbox_not_found/);
    expect(await read(a, 'mine.txt')).toBe('session-a secret\n');
    await Promise.all([stop(a), stop(b)]);
  });

  it('writes, reads and lists files (round trip), owned by the sandbox user', async () => {
    const s = sid();
    await create(s);
    await write(s, 'src/app/main.py', 'print("hi")\n');
    await write(s, '/workspace/notes.txt', 'notes');
    await write(s, 'src/data.bin', Buffer.from([0, 1, 2, 255]));
    expect(await read(s, 'src/app/main.py')).toBe('print("hi")\n');
    expect(await read(s, '/workspace/notes.txt')).toBe('notes');
    const bin = await call<{ content_b64: string; bytes: number }>(h('fileRead'), { session_id: s, path: 'src/data.bin' });
    expect(bin).toMatchObject({ content_b64: b64(Buffer.from([0, 1, 2, 255])), bytes: 4 });
    await exec(s, 'ln -s notes.txt link; mkdir -p empty; echo more >> notes.txt');
    const root = await list(s, '.');
    expect(root.path).toBe('/workspace');
    expect(root.entries.map((e) => [e.name, e.type, e.size])).toEqual([
      ['empty', 'dir', 0],
      ['link', 'link', 0],
      ['notes.txt', 'file', 10],
      ['src', 'dir', 0],
    ]);
    expect(Date.parse(root.entries[0]!.mtime)).toBeGreaterThan(Date.now() - 600_000);
    expect((await list(s, 'src')).entries.map((e) => `${e.name}:${e.type}`)).toEqual(['app:dir', 'data.bin:file']);
    // The program can change what the API wrote: files and folders belong to uid 1000.
    const own = await exec(s, 'stat -c "%u %n" src src/app src/app/main.py && echo x >> src/app/main.py && touch src/app/new && echo ok');
    expect(own.stdout).toBe('1000 src\n1000 src/app\n1000 src/app/main.py\nok\n');
    await stop(s);
  });

  it('refuses paths outside the workspace, missing files and sessions, and files over 8 MiB', async () => {
    const s = sid();
    await create(s);
    for (const path of ['../x', 'a/../../x', '/etc/passwd', '/workspace/../etc/passwd', '/', 'a\0b']) {
      await expect(write(s, path, 'x')).rejects.toThrow(/sandbox_bad_path/);
      await expect(read(s, path)).rejects.toThrow(/sandbox_bad_path/);
      await expect(list(s, path)).rejects.toThrow(/sandbox_bad_path/);
    }
    await expect(read(s, 'nope.txt')).rejects.toThrow(/sandbox_not_found/);
    await expect(list(s, 'nope')).rejects.toThrow(/sandbox_not_found/);
    await expect(read('sess_missing', 'a')).rejects.toThrow(/sandbox_not_found/);
    await expect(exec('sess_missing', 'true')).rejects.toThrow(/sandbox_not_found/);
    await expect(write(s, 'big.bin', Buffer.alloc(MAX_FILE_BYTES + 1))).rejects.toThrow(/sandbox_too_large/);
    await exec(s, `head -c ${MAX_FILE_BYTES + 1} /dev/zero > big.bin`);
    await expect(read(s, 'big.bin')).rejects.toThrow(/sandbox_too_large/);
    await expect(read(s, '.')).rejects.toThrow(/sandbox_bad_path/);
    await stop(s);
  });

  it('snapshots a workspace to <data_dir>/snapshots (0600, sha256) and starts a new session from it', async () => {
    const s = sid();
    await create(s);
    await write(s, 'keep/a.txt', 'alpha\n');
    await exec(s, 'echo beta > b.txt; mkdir -p deep/er; echo gamma > deep/er/c.txt; ln -s b.txt to-b');
    const snapId = `snap_${process.pid}_${n}`;
    const snap = await call<{ bytes: number; sha256: string }>(h('snapshotCreate'), { session_id: s, snapshot_id: snapId });
    const file = sb.snapshots.path(snapId);
    const bytes = readFileSync(file);
    expect(snap.bytes).toBe(bytes.length);
    expect(snap.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(sb.snapshots.dir).mode & 0o777).toBe(0o700);
    await stop(s);

    const t = sid();
    await create(t, { snapshot_id: snapId });
    const r = await exec(t, 'cat keep/a.txt b.txt deep/er/c.txt to-b; stat -c "%u" deep/er/c.txt; echo new > new.txt && echo writable');
    expect(r.stdout).toBe('alpha\nbeta\ngamma\nbeta\n1000\nwritable\n');
    await stop(t);

    await expect(create(sid(), { snapshot_id: 'snap_nope' })).rejects.toThrow(/sandbox_not_found/);
    await expect(call(h('snapshotCreate'), { session_id: t, snapshot_id: '../evil' })).rejects.toThrow(/sandbox_(bad_path|not_found)/);
    expect(await call(h('snapshotDelete'), { snapshot_id: snapId })).toMatchObject({ deleted: true });
    expect(existsSync(file)).toBe(false);
    expect(await call(h('snapshotDelete'), { snapshot_id: snapId })).toMatchObject({ deleted: false });
  });

  it('kills a session exec at its time limit and keeps the session', async () => {
    const s = sid();
    await create(s);
    const r = await exec(s, 'echo before; sleep 30; echo never', { timeout_ms: 600 });
    expect(r).toMatchObject({ timed_out: true, exit_code: null });
    expect(r.stdout).toBe('before\n');
    const ps = await exec(s, 'ps -o args | grep -c "[s]leep 30"; echo alive');
    expect(ps.stdout).toBe('0\nalive\n');
    await stop(s);
  });

  it('runs an exec with a tty through node-pty (docker exec -it)', async () => {
    const s = sid();
    await create(s);
    const r = await exec(s, 'tty; [ -t 0 ] && [ -t 1 ] && echo both-tty; echo "$X"; exit 4', { tty: true, env: { X: 'in-env' } });
    expect(r.stdout).toMatch(/\/dev\/pts\/\d+\r\n/);
    expect(r.stdout).toContain('both-tty\r\n');
    expect(r.stdout).toContain('in-env\r\n');
    expect(r.exit_code).toBe(4);
    const t = await exec(s, 'read line; echo "got $line"', { tty: true, stdin: 'typed\n' });
    expect(t.stdout).toContain('got typed');
    const slow = await exec(s, 'sleep 30', { tty: true, timeout_ms: 600 });
    expect(slow.timed_out).toBe(true);
    expect((await exec(s, 'ps -o args | grep -c "[s]leep 30"')).stdout).toBe('0\n');
    await stop(s);
  });

  it('stops a session after idle_timeout_ms without execs; stop is idempotent', async () => {
    const s = sid();
    const c = await create(s, { idle_timeout_ms: 1000 });
    await exec(s, 'true');
    await new Promise((r) => setTimeout(r, 2500));
    await expect(exec(s, 'true')).rejects.toThrow(/sandbox_not_found/);
    expect(() => docker('inspect', c.container_id)).toThrow();
    expect(await stop(s)).toMatchObject({ stopped: false });
    const t = sid();
    await create(t);
    expect(await stop(t)).toMatchObject({ stopped: true });
    expect(await stop(t)).toMatchObject({ stopped: false });
  });

  it('stops a session exec on cancel and reports what ran; the session lives on', async () => {
    const s = sid();
    await create(s);
    const r = await call<ExecResult>(h('sessionExec'), { session_id: s, language: 'sh', code: 'echo start; sleep 20; echo end', timeout_ms: 60_000 }, cancelOn(capture(), 'start'));
    expect(r).toMatchObject({ canceled: 'canceled by test', exit_code: null, timed_out: false, stdout: 'start\n' });
    expect(r.duration_ms).toBeGreaterThan(0);
    expect((await exec(s, 'echo alive')).stdout).toBe('alive\n');
    await stop(s);
  });
});
