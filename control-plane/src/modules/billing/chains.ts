import { createPublicClient, http, type PublicClient } from 'viem';
import { ServiceError } from '@svc/shared';
import type { ChainConfig } from '../../config.ts';

/**
 * The configured EVM chains and one JSON-RPC client each. A chain is named by its configured name or by
 * its CAIP-2 id (`eip155:<chain_id>`, the x402 network form). Before the first verification on a chain the
 * node's own chain id is compared with the configured one, so an RPC URL pointing at another network (a
 * testnet with a look-alike token, say) can never credit anything.
 */
export class ChainRegistry {
  private readonly clients = new Map<string, PublicClient>();
  private readonly checked = new Set<string>();

  constructor(
    readonly chains: ChainConfig[],
    private readonly timeoutMs = 10_000,
  ) {}

  find(ref: string): ChainConfig | undefined {
    const r = ref.trim().toLowerCase();
    return this.chains.find((c) => c.name === r || `eip155:${c.chainId}` === r);
  }

  /** The chain named by a request field, or 400 naming the configured ones. */
  require(ref: string, param = 'chain'): ChainConfig {
    const c = this.find(ref);
    if (c) return c;
    const known = this.chains.map((x) => x.name).join(', ');
    throw new ServiceError('invalid_request', `Unknown chain "${ref}"; configured: ${known || 'none (SVC_CHAINS is unset)'}`, { param });
  }

  /** A JSON-RPC client for the chain; its chain id is checked once. */
  async client(c: ChainConfig): Promise<PublicClient> {
    let client = this.clients.get(c.name);
    if (!client) {
      client = createPublicClient({ transport: http(c.rpcUrl, { timeout: this.timeoutMs, retryCount: 1 }) }) as PublicClient;
      this.clients.set(c.name, client);
    }
    if (!this.checked.has(c.name)) {
      const id = await rpc(c, 'eth_chainId', () => client.getChainId());
      if (id !== c.chainId) {
        throw new ServiceError('upstream_error', `The RPC node configured for chain ${c.name} serves chain id ${id}, not ${c.chainId}; nothing can be verified on it`);
      }
      this.checked.add(c.name);
    }
    return client;
  }
}

/** Runs one RPC call; a transport failure becomes 502 upstream_error without the node's URL (it may carry a key). */
export async function rpc<T>(c: ChainConfig, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    throw new ServiceError('upstream_error', `The RPC node of chain ${c.name} failed on ${what} (${(e as Error).name}); nothing was recorded, try again`);
  }
}
