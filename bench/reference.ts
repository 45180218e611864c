/**
 * Child processes the bench scripts share: the roles of bench/inference-roles.ts (the zero-latency upstream,
 * the bare proxy, the in-process gateway) and the reference gateway, Portkey's AI gateway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './inference-roles.ts';

export type Role = { child: ChildProcess; info: Record<string, any>; ask(line: string): Promise<any> };

/** A child role: its first JSON line is `info`; `ask` writes a line to its stdin and resolves with its next JSON line. */
export function startRole(name: string, extra: string[], node: string[] = []): Promise<Role> {
  const child = spawn(process.execPath, [...node, '--import', 'tsx', fileURLToPath(new URL('./inference-roles.ts', import.meta.url)), '--role', name, ...extra], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: Array<(o: any) => void> = [];
  return new Promise((resolve, reject) => {
    let buf = '';
    let first = true;
    child.stdout!.on('data', (d) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const o = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (first) {
          first = false;
          resolve({ child, info: o, ask: (line) => new Promise((r) => (waiting.push(r), child.stdin!.write(`${line}\n`))) });
        } else waiting.shift()?.(o);
      }
    });
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

export type Reference = {
  child: ChildProcess;
  url: string;
  headers: Record<string, string>;
  label: string;
  /** Milliseconds from the spawn to its first answered chat completion. */
  bootMs: number;
};

/**
 * The reference gateway: Portkey's AI gateway on its own Node server (`build/start-server.js`, as its
 * `start:node` script runs it), sent to the upstream with its custom-host header, the way its documentation
 * points it at an OpenAI-compatible server. Resolves once it has answered a chat completion (`body`); null
 * when the package is not installed.
 */
export async function startPortkey(upstreamUrl: string, body: string): Promise<Reference | null> {
  let pkg: string;
  try {
    pkg = createRequire(import.meta.url).resolve('@portkey-ai/gateway/package.json');
  } catch {
    console.error('the reference gateway (@portkey-ai/gateway) is not installed: its row is left out');
    return null;
  }
  const version = (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(dirname(pkg), 'build', 'start-server.js'), `--port=${port}`, '--headless'], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}/v1`;
  const headers = { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamUrl, authorization: 'Bearer sk-bench' };
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`the reference gateway exited with ${child.exitCode}`);
      const ok = await fetch(`${url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) break;
      if (i >= 1200) throw new Error('the reference gateway did not answer within 30 s');
      await new Promise((r) => setTimeout(r, 25));
    }
  } catch (e) {
    child.kill();
    throw e;
  }
  const bootMs = performance.now() - t0;
  return { child, url, headers, bootMs, label: `Portkey's AI gateway ${version} (@portkey-ai/gateway), its Node server, provider openai with x-portkey-custom-host` };
}
