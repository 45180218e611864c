/** The smallest capabilities a heartbeat can carry (tests that speak the heartbeat route without an agent). */
export const TEST_CAPABILITIES = { cpu: { cores: 1, model: 't', load: 0 }, memory: { total_bytes: 1, available_bytes: 1 }, disk: { total_bytes: 1, available_bytes: 1 }, gpus: [], docker: { reachable: false, version: null }, os: 't' };

/** `POST /v1/nodes/heartbeat` with `nodeKey`, as an agent with no jobs sends it. */
export function nodeHeartbeat(baseUrl: string, nodeKey: string): Promise<Response> {
  return fetch(`${baseUrl}/v1/nodes/heartbeat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${nodeKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capabilities: TEST_CAPABILITIES, load: { running_jobs: 0 }, agent_version: 'test' }),
  });
}
