import { spawnSync } from 'node:child_process';

/** Whether a Docker engine answers here, and which sandbox images exist (CI builds both). */
export function dockerAvailable(): boolean {
  const r = spawnSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim().length > 0;
}

export function imageExists(name: string): boolean {
  return spawnSync('docker', ['image', 'inspect', name], { encoding: 'utf8' }).status === 0;
}

export const SMALL_IMAGE = 'svc-sandbox:small';
export const REAL_IMAGE = 'svc-sandbox:latest';
