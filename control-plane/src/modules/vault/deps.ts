import { AssetsService } from './assets.ts';
import { ClaimsService } from './claims.ts';
import { VaultCore, type VaultDeps } from './core.ts';
import { DistributionsService } from './distributions.ts';
import { AttestersService } from './attesters.ts';
import { AttestationsService } from './attestations.ts';
import { ProofsService } from './proofs.ts';
import { DocumentsService } from './documents.ts';
import { GrantsService } from './grants.ts';
import { PositionsService } from './positions.ts';
import { TransfersService } from './transfers.ts';

/** The vault's services over one core (sealing, access, the chain). */
export interface Vault {
  core: VaultCore;
  assets: AssetsService;
  positions: PositionsService;
  transfers: TransfersService;
  claims: ClaimsService;
  distributions: DistributionsService;
  attesters: AttestersService;
  attestations: AttestationsService;
  proofs: ProofsService;
  documents: DocumentsService;
  grants: GrantsService;
  explorerSource(): { counts(): Promise<Record<string, number>> };
}

export function createVault(d: VaultDeps): Vault {
  const core = new VaultCore(d);
  const positions = new PositionsService(core);
  return {
    core,
    assets: new AssetsService(core),
    positions,
    transfers: new TransfersService(core),
    claims: new ClaimsService(core),
    distributions: new DistributionsService(core),
    attesters: new AttestersService(core),
    attestations: new AttestationsService(core),
    proofs: new ProofsService(core),
    documents: new DocumentsService(core),
    grants: new GrantsService(core, positions),
    explorerSource: () => ({
      counts: async () => {
        const r = await d.db.selectFrom('vault_chain_events').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        const a = await d.db.selectFrom('vault_assets').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { vault_assets: Number(a.n), vault_chain_events: Number(r.n) };
      },
    }),
  };
}
