import si from 'systeminformation';
import type { Capabilities } from '@svc/shared';

/** A capability snapshot for the heartbeat, read with systeminformation. Docker reachability included. */
export async function readCapabilities(dockerCheck: () => Promise<{ reachable: boolean; version: string | null }>): Promise<Capabilities> {
  const [cpu, load, mem, fs, gfx, os, docker] = await Promise.all([
    si.cpu(),
    si.currentLoad().catch(() => ({ currentLoad: 0 })),
    si.mem(),
    si.fsSize().catch(() => []),
    si.graphics().catch(() => ({ controllers: [] as si.Systeminformation.GraphicsControllerData[] })),
    si.osInfo(),
    dockerCheck().catch(() => ({ reachable: false, version: null })),
  ]);
  const root = fs.find((f) => f.mount === '/') ?? fs[0];
  return {
    cpu: { cores: cpu.cores, model: `${cpu.manufacturer} ${cpu.brand}`.trim().slice(0, 200), load: Number((load.currentLoad ?? 0).toFixed(2)) },
    memory: { total_bytes: mem.total, available_bytes: mem.available },
    disk: { total_bytes: root?.size ?? 0, available_bytes: root?.available ?? 0 },
    gpus: gfx.controllers
      .filter((g) => g.vram !== null && (g.vram ?? 0) > 0)
      .slice(0, 64)
      .map((g) => ({ model: `${g.vendor} ${g.model}`.trim().slice(0, 200), vram_bytes: g.vram ? g.vram * 1024 * 1024 : null })),
    docker,
    os: `${os.distro} ${os.release} ${os.arch}`.trim().slice(0, 200),
  };
}

/** Docker is reachable when its API answers on the local socket. */
export async function dockerReachable(socketPath = '/var/run/docker.sock'): Promise<{ reachable: boolean; version: string | null }> {
  const http = await import('node:http');
  return new Promise((resolve) => {
    const req = http.request({ socketPath, path: '/version', method: 'GET', timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        try {
          resolve({ reachable: res.statusCode === 200, version: (JSON.parse(body) as { Version?: string }).Version ?? null });
        } catch {
          resolve({ reachable: false, version: null });
        }
      });
    });
    req.on('error', () => resolve({ reachable: false, version: null }));
    req.on('timeout', () => {
      req.destroy();
      resolve({ reachable: false, version: null });
    });
    req.end();
  });
}
