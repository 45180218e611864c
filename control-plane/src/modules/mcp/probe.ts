import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ServiceError } from '@svc/shared';
import type { SelfAddress } from '../webhooks/url.ts';
import type { UpstreamTarget } from './target.ts';
import { UpstreamFailure, guardedFetch } from './upstream.ts';

const MAX_PAGES = 50;

/**
 * Connects to a registered server with the MCP SDK's client (initialize), lists its tools (every page, at most
 * 50) and ends the session; the whole probe is bounded by the upstream timeout. Only tool names come back.
 */
export async function probeTools(target: UpstreamTarget, self: SelfAddress, timeoutMs: number): Promise<string[]> {
  const transport = new StreamableHTTPClientTransport(target.url, {
    fetch: guardedFetch(self, timeoutMs),
    requestInit: { headers: target.headers },
  });
  const client = new Client({ name: 'svc-gateway-probe', version: '1' });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ServiceError('upstream_timeout', `The MCP server did not answer within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  const probe = async () => {
    await client.connect(transport);
    const names: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const r = await client.listTools(cursor === undefined ? {} : { cursor });
      names.push(...r.tools.map((t) => t.name));
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    await transport.terminateSession().catch(() => undefined);
    return names;
  };
  try {
    return await Promise.race([probe(), deadline]);
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    if (e instanceof UpstreamFailure) throw new ServiceError(e.kind === 'timeout' ? 'upstream_timeout' : 'upstream_error', `The MCP server could not be probed: ${e.message}`);
    throw new ServiceError('upstream_error', `The MCP server did not answer initialize and tools/list: ${(e as Error).message.slice(0, 300)}`);
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => undefined);
  }
}
