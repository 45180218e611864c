import type { Clock } from '@svc/shared';
import type { ChainConfig } from '../../config.ts';
import type { AssetsConfig } from '../../config/assets.ts';
import { ChainRegistry } from '../billing/chains.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { checkSourceUrl, readFigure } from './https-source.ts';
import { evmAssetId, type CheckSpec } from './record.ts';
import { RawRpc } from './rpc.ts';
import type { CheckBody } from './schemas.ts';
import { readToken, type Reading, type TokenRead } from './token.ts';

export interface CheckerDeps {
  clock: Clock;
  chains: ChainConfig[];
  config: AssetsConfig;
  self: SelfAddress;
}

/**
 * Turns a check request into its spec (refusing bad input with a 400 before anything is read or charged),
 * and reads every source of a spec: the token's chain facts at the pinned block and the HTTPS reserve
 * figure, each answer kept byte for byte.
 */
export class Checker {
  readonly chains: ChainRegistry;

  constructor(private readonly d: CheckerDeps) {
    this.chains = new ChainRegistry(d.chains);
  }

  /** The spec of a check request; 400 naming the field for an unknown chain or a bad source URL. */
  specOf(body: CheckBody): { spec: CheckSpec; assetId: string } {
    const chain = this.chains.require(body.subject.chain, 'subject.chain');
    const address = body.subject.address.toLowerCase();
    const c = body.claims;
    const spec: CheckSpec = {
      subject: { kind: 'evm_token', chain: chain.name, chain_id: chain.chainId, address },
      claims: {
        code_hash: c.code_hash?.toLowerCase() ?? null,
        name: c.name ?? null,
        symbol: c.symbol ?? null,
        decimals: c.decimals ?? null,
        total_supply: c.total_supply ? BigInt(c.total_supply).toString() : null,
      },
      reserves: body.reserves.map((r) => ({
        label: r.label,
        address: r.address.toLowerCase(),
        token: r.token?.toLowerCase() ?? null,
        claimed_balance: r.claimed_balance ? BigInt(r.claimed_balance).toString() : null,
        min_balance: r.min_balance ? BigInt(r.min_balance).toString() : null,
      })),
      reserve_source: body.reserve_source
        ? {
            url: checkSourceUrl(body.reserve_source.url, this.d.self, 'reserve_source.url'),
            json_pointer: body.reserve_source.json_pointer,
            label: body.reserve_source.label,
            claimed_figure: body.reserve_source.claimed_figure ?? null,
            min_figure: body.reserve_source.min_figure ?? null,
          }
        : null,
      freshness_seconds: body.freshness_seconds ?? this.d.config.attestationFreshnessSeconds,
    };
    return { spec, assetId: evmAssetId(chain.chainId, address) };
  }

  /**
   * Reads every source of the spec; never fails for a source (an unreachable one is an unavailable reading),
   * only for bad input found on the way: an address without code, a block ahead of the head (400).
   */
  async read(spec: CheckSpec, pin: number | null): Promise<TokenRead> {
    const chain = this.chains.find(`eip155:${spec.subject.chain_id}`);
    const figure = spec.reserve_source ? this.readFigure(spec.reserve_source) : null;
    let token: TokenRead;
    if (!chain) {
      // A refresh of an asset whose chain was since removed from SVC_CHAINS: that source is unconfigured.
      const read_at = this.d.clock.now();
      const error = `chain ${spec.subject.chain} (eip155:${spec.subject.chain_id}) is not configured on this gateway`;
      token = { readings: [{ name: 'chain_id', kind: 'evm_rpc', pinned: false, value: null, outcome: 'unavailable', error, exchange: { request: '', body: null, sha256: null, read_at, error } }], block: null };
    } else {
      const rpc = new RawRpc(chain.rpcUrl, this.d.clock, this.d.config.sourceTimeoutMs);
      const reserves = spec.reserves.map((r) => ({ label: r.label, address: r.address, token: r.token }));
      try {
        token = await readToken(rpc, chain, spec.subject.address, pin, reserves);
      } catch (e) {
        await figure; // settle it before refusing
        throw e;
      }
    }
    if (figure) token.readings.push(await figure);
    return token;
  }

  private async readFigure(src: NonNullable<CheckSpec['reserve_source']>): Promise<Reading> {
    const r = await readFigure(src, { self: this.d.self, clock: this.d.clock, timeoutMs: this.d.config.sourceTimeoutMs, enabled: this.d.config.httpsSources });
    return { name: 'reserve_figure', kind: 'https', pinned: false, value: r.value, outcome: r.value === null ? 'unavailable' : 'read', error: r.exchange.error, exchange: r.exchange };
  }
}
