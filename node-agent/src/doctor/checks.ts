import { mkdirSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import type { Capabilities } from '@svc/shared';
import type { AgentConfig } from '../config.ts';
import type { InferenceOptions } from '../inference/index.ts';

/**
 * What `svc-node doctor` checks: the things an operator gets wrong, each answered ok or with what to do.
 * Every check talks to the real thing (the Docker socket, the control plane, the disk, the local inference
 * server); a check that cannot run because an earlier one failed says so and fails too.
 */
export interface Check {
  name: 'config' | 'docker' | 'image' | 'gateway' | 'clock' | 'node key' | 'data dir' | 'inference';
  ok: boolean;
  detail: string;
  /** What to do, when not ok. */
  fix?: string;
}

export interface DoctorInputs {
  /** agent.json, or why it could not be read. */
  config: AgentConfig | { error: string; path: string };
  dockerSocket: string;
  image: string;
  /** How to build the sandbox image on this host (a command). */
  imageBuild: string;
  /** The local inference server from the environment, null when none, or why the environment is wrong. */
  inference: InferenceOptions | null | { error: string };
  /** The capability snapshot the key check sends as a heartbeat. */
  capabilities: () => Promise<Capabilities>;
  agentVersion: string;
  now?: () => number;
  /** The clock skew the control plane tolerates (SIWE messages and receipt times). Default 60 s. */
  maxSkewMs?: number;
  /** Free space the data dir needs for snapshots and workspaces. Default 1 GiB. */
  minFreeBytes?: number;
  timeoutMs?: number;
}

export const MAX_SKEW_MS = 60_000;
export const MIN_FREE_BYTES = 1024 ** 3;

const message = (e: unknown) => {
  const err = e as Error & { code?: string; cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.code ?? err.cause?.message ?? err.message ?? String(e);
};
const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GiB`;

/** GET over the Docker socket: status and parsed body. */
function dockerGet(socketPath: string, path: string, timeoutMs: number): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: 'GET', timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: Record<string, unknown> = {};
        try {
          body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    req.end();
  });
}

async function dockerChecks(i: DoctorInputs, timeoutMs: number): Promise<Check[]> {
  let version: string;
  try {
    const r = await dockerGet(i.dockerSocket, '/version', timeoutMs);
    if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
    version = String(r.body.Version ?? 'unknown');
  } catch (e) {
    const why = message(e);
    const fix =
      why === 'EACCES'
        ? `this user may not use ${i.dockerSocket}: run the doctor with sudo (the service gets the docker group from its unit)`
        : 'install Docker (sudo apt install docker.io) and start it (sudo systemctl enable --now docker)';
    return [
      { name: 'docker', ok: false, detail: `the Docker engine does not answer at ${i.dockerSocket} (${why})`, fix },
      { name: 'image', ok: false, detail: `${i.image}: not checked (no Docker engine)`, fix: `once Docker answers: ${i.imageBuild}` },
    ];
  }
  const docker: Check = { name: 'docker', ok: true, detail: `Docker ${version} answers at ${i.dockerSocket}` };
  try {
    const r = await dockerGet(i.dockerSocket, `/images/${encodeURIComponent(i.image)}/json`, timeoutMs);
    if (r.status === 200) return [docker, { name: 'image', ok: true, detail: `${i.image} is present (${String(r.body.Id ?? '').slice(0, 19)})` }];
    if (r.status === 404) return [docker, { name: 'image', ok: false, detail: `the sandbox image ${i.image} is not on this node`, fix: `build it (a few minutes, from Debian packages): ${i.imageBuild}` }];
    throw new Error(`HTTP ${r.status}`);
  } catch (e) {
    return [docker, { name: 'image', ok: false, detail: `cannot inspect ${i.image}: ${message(e)}`, fix: `check the Docker engine's log (journalctl -u docker)` }];
  }
}

const reEnroll = 'sudo svc-node enroll --url https://<gateway> --key-file <file with the node key>';

async function gatewayChecks(cfg: AgentConfig, i: DoctorInputs, timeoutMs: number): Promise<{ checks: Check[]; nodeId: string | null }> {
  const now = i.now ?? Date.now;
  const maxSkew = i.maxSkewMs ?? MAX_SKEW_MS;
  let res: Response;
  const sent = now();
  try {
    res = await fetch(new URL('/healthz', cfg.url), { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
  } catch (e) {
    const fix = `check the URL in agent.json and that this host can reach it (DNS, firewall, proxy); to change it: ${reEnroll}`;
    return {
      nodeId: null,
      checks: [
        { name: 'gateway', ok: false, detail: `${cfg.url} does not answer (${message(e)})`, fix },
        { name: 'clock', ok: false, detail: 'not checked (the control plane does not answer)', fix: 'once it answers, run the doctor again' },
        { name: 'node key', ok: false, detail: 'not checked (the control plane does not answer)', fix: 'once it answers, run the doctor again' },
      ],
    };
  }
  const received = now();
  const checks: Check[] = [];
  checks.push(
    res.ok
      ? { name: 'gateway', ok: true, detail: `${cfg.url} answers (GET /healthz: ${res.status}, ${Math.round(received - sent)} ms)` }
      : { name: 'gateway', ok: false, detail: `${cfg.url} answers GET /healthz with HTTP ${res.status}`, fix: 'the control plane is unhealthy or the URL names another service: check the URL in agent.json' },
  );
  const date = Date.parse(res.headers.get('date') ?? '');
  if (Number.isNaN(date)) {
    checks.push({ name: 'clock', ok: false, detail: 'the control plane sent no Date header to compare clocks with', fix: 'check that the URL is the control plane itself, not a proxy that drops headers' });
  } else {
    // The Date header has whole seconds: the gateway's clock was in [date, date + 1 s) at some moment of the round trip.
    const skew = Math.max(0, sent - (date + 999), date - received);
    const ahead = sent > date + 999;
    checks.push(
      skew <= maxSkew
        ? { name: 'clock', ok: true, detail: `within ${Math.ceil(Math.max(skew, 1000) / 1000)} s of the control plane's (allowed: ${maxSkew / 1000} s)` }
        : {
            name: 'clock',
            ok: false,
            detail: `this host's clock is ${Math.round(skew / 1000)} s ${ahead ? 'ahead of' : 'behind'} the control plane's (allowed: ${maxSkew / 1000} s; sign-ins and receipts are refused beyond it)`,
            fix: 'synchronise the clock: sudo timedatectl set-ntp true (or install chrony or systemd-timesyncd)',
          },
    );
  }
  let nodeId: string | null = null;
  try {
    const body = { capabilities: await i.capabilities(), endpoint: cfg.endpoint, load: { running_jobs: 0 }, agent_version: i.agentVersion };
    const hb = await fetch(new URL('/v1/nodes/heartbeat', cfg.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${cfg.node_key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const json = (await hb.json().catch(() => ({}))) as { node_id?: string; approved?: boolean; disabled?: boolean; draining?: boolean; error?: { message?: string } };
    if (hb.ok && json.node_id) {
      nodeId = json.node_id;
      const state = !json.approved ? 'waiting for an admin to approve it (svc nodes approve)' : json.disabled ? 'disabled by its owner' : json.draining ? 'draining' : 'approved';
      checks.push({ name: 'node key', ok: true, detail: `accepted: node ${json.node_id}, ${state}` });
    } else if (hb.status === 401 || hb.status === 403) {
      checks.push({ name: 'node key', ok: false, detail: `refused: ${json.error?.message ?? `HTTP ${hb.status}`}`, fix: `get a new key (svc nodes enroll, or an admin) and: ${reEnroll}` });
    } else {
      checks.push({ name: 'node key', ok: false, detail: `the heartbeat answered HTTP ${hb.status}${json.error?.message ? `: ${json.error.message}` : ''}`, fix: 'run the doctor again; if it persists, the control plane\'s log says why' });
    }
  } catch (e) {
    checks.push({ name: 'node key', ok: false, detail: `the heartbeat failed (${message(e)})`, fix: 'run the doctor again once the control plane answers' });
  }
  return { checks, nodeId };
}

function dataDirCheck(dir: string, minFree: number): Check {
  const fix = `sudo install -d -m 0700 -o svc-node -g svc-node ${dir}`;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const probe = join(dir, `.doctor-${process.pid}`);
    writeFileSync(probe, 'ok');
    rmSync(probe);
  } catch (e) {
    return { name: 'data dir', ok: false, detail: `${dir} is not writable (${message(e)})`, fix };
  }
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  if (free < minFree) return { name: 'data dir', ok: false, detail: `${dir} has ${gib(free)} free; snapshots and workspaces need at least ${gib(minFree)}`, fix: `free space on that file system, or move the data dir: ${reEnroll} --data-dir <dir>` };
  return { name: 'data dir', ok: true, detail: `${dir} is writable, ${gib(free)} free` };
}

async function inferenceCheck(i: DoctorInputs, cfg: AgentConfig | null, nodeId: string | null, timeoutMs: number): Promise<Check> {
  const inf = i.inference;
  if (inf === null) return { name: 'inference', ok: true, detail: 'no local inference server configured (SVC_INFERENCE_URL unset): sandbox work only' };
  if ('error' in inf) return { name: 'inference', ok: false, detail: inf.error, fix: 'fix SVC_INFERENCE_URL / SVC_INFERENCE_MODEL_MAP in the service environment' };
  let listed: string[];
  try {
    const res = await fetch(`${inf.url}/models`, { headers: inf.apiKey ? { authorization: `Bearer ${inf.apiKey}` } : {}, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`GET ${inf.url}/models answered HTTP ${res.status}`);
    const body = (await res.json()) as { data?: Array<{ id?: unknown }>; models?: Array<{ name?: unknown; model?: unknown }> };
    listed = [...(body.data ?? []).map((m) => String(m.id)), ...(body.models ?? []).flatMap((m) => [String(m.name), String(m.model)])];
  } catch (e) {
    return { name: 'inference', ok: false, detail: `the local inference server at ${inf.url} does not answer (${message(e)})`, fix: 'start it (ollama serve, vllm serve, llama-server) or fix SVC_INFERENCE_URL (it ends in /v1)' };
  }
  let declared: string[] = [];
  if (cfg && nodeId) {
    const nodes = (await fetch(new URL('/v1/nodes', cfg.url), { signal: AbortSignal.timeout(timeoutMs) })
      .then((r) => r.json())
      .catch(() => [])) as Array<{ id?: string; models?: string[] }>;
    declared = nodes.find((n) => n.id === nodeId)?.models ?? [];
  }
  const local = (m: string) => inf.modelMap?.[m] ?? m;
  const missing = declared.filter((m) => !listed.includes(local(m)) && !listed.includes(m));
  if (missing.length) {
    return {
      name: 'inference',
      ok: false,
      detail: `${inf.url} does not list ${missing.map((m) => (local(m) === m ? m : `${m} (as ${local(m)})`)).join(', ')}, declared by this node`,
      fix: 'load or pull those models on the local server (e.g. ollama pull <name>), or map them with SVC_INFERENCE_MODEL_MAP',
    };
  }
  return { name: 'inference', ok: true, detail: `${inf.url} answers with ${listed.length} models${declared.length ? `, every declared one among them (${declared.join(', ')})` : ''}` };
}

export async function runChecks(i: DoctorInputs): Promise<Check[]> {
  const timeoutMs = i.timeoutMs ?? 5000;
  const cfg = 'error' in i.config ? null : i.config;
  const checks: Check[] = [];
  checks.push(cfg ? { name: 'config', ok: true, detail: `control plane ${cfg.url}, node key ${cfg.node_key.slice(0, 14)}…` } : { name: 'config', ok: false, detail: (i.config as { error: string }).error, fix: reEnroll });
  checks.push(...(await dockerChecks(i, timeoutMs)));
  let nodeId: string | null = null;
  if (cfg) {
    const g = await gatewayChecks(cfg, i, timeoutMs);
    checks.push(...g.checks);
    nodeId = g.nodeId;
    checks.push(dataDirCheck(cfg.data_dir, i.minFreeBytes ?? MIN_FREE_BYTES));
  } else {
    for (const name of ['gateway', 'clock', 'node key', 'data dir'] as const) checks.push({ name, ok: false, detail: 'not checked (no agent configuration)', fix: reEnroll });
  }
  checks.push(await inferenceCheck(i, cfg, nodeId, timeoutMs));
  return checks;
}
