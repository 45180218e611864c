import { HEARTBEAT_SECONDS, type HeartbeatBody } from '@svc/shared';

export interface HeartbeatAnswer {
  node_id: string;
  approved: boolean;
  disabled: boolean;
  draining: boolean;
  next_heartbeat_seconds: number;
}

/** Posts one heartbeat; throws with the control plane's message on refusal. */
export async function postHeartbeat(url: string, nodeKey: string, body: HeartbeatBody): Promise<HeartbeatAnswer> {
  const res = await fetch(new URL('/v1/nodes/heartbeat', url), {
    method: 'POST',
    headers: { authorization: `Bearer ${nodeKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const json = (await res.json().catch(() => ({}))) as HeartbeatAnswer & { error?: { type: string; message: string } };
  if (!res.ok) throw Object.assign(new Error(json.error?.message ?? `heartbeat answered HTTP ${res.status}`), { status: res.status });
  return json;
}

export const HEARTBEAT_MS = HEARTBEAT_SECONDS * 1000;
