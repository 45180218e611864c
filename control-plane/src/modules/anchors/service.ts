import type { Kysely } from 'kysely';
import { ServiceError, type Clock } from '@svc/shared';
import type { Hex } from 'viem';
import type { AnchorsConfig } from '../../config/anchors.ts';
import type { DB } from '../../db/schema.ts';
import type { AnchorBackend } from './backend.ts';
import { inclusionProof, merkleRoot } from './merkle.ts';
import { AnchorStore, type SubmissionRow } from './store.ts';

export type AnchorState = 'pending' | 'anchored' | 'failed' | 'not_anchored';

/** One chain's record of a root, as artifacts and the anchor document show it. */
export interface ChainAnchor {
  backend: string;
  type: 'evm' | 'solana';
  chain_id: number;
  state: SubmissionRow['state'];
  from: string;
  tx_hash: string | null;
  block_number: number | null;
  block_hash: string | null;
  anchored_at: string | null;
}

/** The `anchor` field of an artifact: its state and, once batched, its inclusion proof. */
export interface AnchorField {
  state: AnchorState;
  hash: string;
  root: string | null;
  leaf_index: number | null;
  tree_size: number | null;
  /** RFC 6962 audit path, nearest the leaf first. */
  proof: string[];
  anchors: ChainAnchor[];
}

const HASH = /^0x[0-9a-f]{64}$/;

/** The items with their hashes lower-cased; a hash that is not 32 bytes of 0x-hex is a bug of the caller. */
function checked(kind: string, items: Array<{ ref: string; hash: string }>): Array<{ ref: string; hash: string }> {
  return items.map((i) => {
    const hash = i.hash.toLowerCase();
    if (!HASH.test(hash)) throw new Error(`anchors: ${kind} ${i.ref}: not a 32-byte hash: ${i.hash}`);
    return { ref: i.ref, hash };
  });
}
/** A failed attempt is tried again after 30 s, doubling up to an hour. */
const backoffMs = (attempts: number) => Math.min(3_600_000, 30_000 * 2 ** Math.max(0, attempts - 1));

const hexRoot = (hashes: string[]) => `0x${merkleRoot(hashes.map((h) => Buffer.from(h.slice(2), 'hex'))).toString('hex')}`;

/**
 * Public anchors: every proof product queues the 32-byte hash of an artifact here (`enqueue`); the leader
 * gathers queued hashes into RFC 6962 Merkle batches (`gather`) and writes each root to every configured
 * chain (`advance`): sign and store the transaction, send it, wait for its confirmations; a failure is
 * retried with backoff. `field` is what an artifact shows as its `anchor`, `document` the public record
 * of a root.
 */
export class Anchors {
  readonly store: AnchorStore;

  constructor(
    db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly config: AnchorsConfig,
    /** Where roots are written (`anchorBackends(config)`). */
    readonly backends: AnchorBackend[],
    private readonly log: (err: unknown, msg: string) => void = () => undefined,
  ) {
    this.store = new AnchorStore(db);
  }

  /** Queues `hash` (0x-hex, 32 bytes) of the artifact `kind`/`ref` for the next batch; once per triple. */
  async enqueue(kind: string, ref: string, hash: string): Promise<void> {
    await this.store.enqueueMany(kind, checked(kind, [{ ref, hash }]), this.clock.now());
  }

  /** Queues hashes in the caller's transaction: queued exactly when what they hash commits. */
  async enqueueIn(trx: Kysely<DB>, kind: string, items: Array<{ ref: string; hash: string }>): Promise<void> {
    await this.store.enqueueMany(kind, checked(kind, items), this.clock.now(), trx);
  }

  /** Queues the hash if it is not yet, and returns the artifact's anchor field. */
  async track(kind: string, ref: string, hash: string): Promise<AnchorField> {
    return (await this.fields(kind, [{ ref, hash }], true))[0]!;
  }

  async field(kind: string, ref: string, hash: string): Promise<AnchorField> {
    return (await this.fields(kind, [{ ref, hash }]))[0]!;
  }

  /**
   * The anchor fields of artifacts of one kind, in the order given; with `track`, any not queued yet is
   * queued first (so an artifact whose process died before it was queued is queued on its next read).
   */
  async fields(kind: string, items: Array<{ ref: string; hash: string }>, track = false): Promise<AnchorField[]> {
    const wanted = checked(kind, items);
    if (track) await this.store.enqueueMany(kind, wanted, this.clock.now());
    const leaves = await this.store.leaves(kind, [...new Set(wanted.map((w) => w.ref))]);
    const roots = [...new Set(leaves.map((l) => l.batch_root).filter((r): r is string => r !== null))];
    const batches = new Map(
      await Promise.all(roots.map(async (r) => [r, { hashes: (await this.store.batchLeaves(r)).map((x) => Buffer.from(x.slice(2), 'hex')), anchors: (await this.store.submissions(r)).map(chainAnchor) }] as const)),
    );
    const configured = this.backends.length > 0;
    return wanted.map((w) => {
      const leaf = leaves.find((l) => l.ref === w.ref && l.hash === w.hash);
      const batch = leaf?.batch_root ? batches.get(leaf.batch_root) : undefined;
      if (!leaf || !batch || leaf.leaf_index === null) {
        return { state: configured ? 'pending' : 'not_anchored', hash: w.hash, root: null, leaf_index: null, tree_size: null, proof: [], anchors: [] };
      }
      return {
        state: stateOf(batch.anchors, configured),
        hash: w.hash,
        root: leaf.batch_root,
        leaf_index: leaf.leaf_index,
        tree_size: batch.hashes.length,
        proof: inclusionProof(batch.hashes, leaf.leaf_index).map((b) => `0x${b.toString('hex')}`),
        anchors: batch.anchors,
      };
    });
  }

  /** Gathers queued hashes into batches (the leader's loop); returns the roots made. */
  async gather(): Promise<string[]> {
    const roots: string[] = [];
    const backends = this.backends.map((b) => ({ name: b.name, type: b.type, chainId: b.chainId, from: b.from }));
    for (;;) {
      const b = await this.store.gather(this.config.batchMax, this.clock.now(), hexRoot, backends);
      if (!b) return roots;
      roots.push(b.root);
      if (b.leaves < this.config.batchMax) return roots;
    }
  }

  /** Moves every due submission one step on (the leader's loop). */
  async advance(): Promise<void> {
    for (const s of await this.store.due(this.clock.now(), 100)) {
      const chain = this.backends.find((b) => b.name === s.backend);
      if (!chain) continue; // a backend no longer configured: left as it stands
      await this.step(chain, s).catch(async (e: unknown) => {
        this.log(e, `anchor of ${s.root} on ${s.backend} failed; retrying`);
        const attempts = s.attempts + 1;
        await this.store.update(s.root, s.backend, {
          state: 'failed',
          attempts,
          last_error: String((e as Error).message ?? e).slice(0, 500),
          next_attempt_at: new Date(this.clock.now().getTime() + backoffMs(attempts)),
        });
      });
    }
  }

  /** One step of one submission: sign and send, or look at what was sent. */
  private async step(chain: AnchorBackend, s: SubmissionRow): Promise<void> {
    const now = this.clock.now();
    if (!s.tx_hash || !s.raw_tx) {
      const tx = await chain.sign(s.root as Hex);
      // Stored before it is sent: a process that dies in between sends this same transaction next time.
      await this.store.update(s.root, s.backend, { raw_tx: tx.raw, tx_hash: tx.hash, nonce: tx.validity, from_address: chain.from });
      await chain.send(tx.raw);
      await this.store.update(s.root, s.backend, { state: 'pending', last_error: null, next_attempt_at: now });
      return;
    }
    const st = await chain.status(s.tx_hash);
    if (st.state === 'confirmed') {
      await this.store.update(s.root, s.backend, { state: 'anchored', block_number: st.blockNumber, block_hash: st.blockHash, anchored_at: now, last_error: null });
    } else if (st.state === 'waiting') {
      if (s.state === 'failed') await this.store.update(s.root, s.backend, { state: 'pending', last_error: null });
    } else if (st.state === 'reverted') {
      throw await this.dropTx(s, `the anchor transaction ${s.tx_hash} failed in block ${st.blockNumber}`);
    } else if (s.nonce !== null && (await chain.expired(Number(s.nonce)))) {
      // Its nonce was used by another transaction of the account, or its blockhash expired: it can never be included.
      throw await this.dropTx(s, `the anchor transaction ${s.tx_hash} can no longer be included (${chain.type === 'evm' ? `nonce ${s.nonce} used by another transaction` : `blockhash valid to height ${s.nonce} expired`})`);
    } else {
      await chain.send(s.raw_tx);
      if (s.state === 'failed') await this.store.update(s.root, s.backend, { state: 'pending', last_error: null });
    }
  }

  /** Forgets a transaction that can never anchor, so the next attempt signs a new one. */
  private async dropTx(s: SubmissionRow, why: string): Promise<Error> {
    await this.store.update(s.root, s.backend, { raw_tx: null, tx_hash: null, nonce: null });
    return new Error(why);
  }

  /** The public record of a root: its ordered leaves, the tree, and each chain's anchor with how to check it. */
  async document(root: string) {
    const r = root.toLowerCase();
    if (!HASH.test(r)) throw new ServiceError('invalid_request', 'root must be a 0x-prefixed 32-byte hex hash', { field: 'root' });
    const batch = await this.store.batch(r);
    if (!batch) throw new ServiceError('not_found', 'No anchor batch has this root');
    const [leaves, subs] = await Promise.all([this.store.batchLeaves(r), this.store.submissions(r)]);
    return {
      root: r,
      leaf_count: leaves.length,
      leaves,
      created_at: batch.created_at.toISOString(),
      tree: TREE,
      state: stateOf(subs.map(chainAnchor), this.backends.length > 0),
      anchors: subs.map((s) => ({ ...chainAnchor(s), attempts: s.attempts, last_error: s.last_error, verify: this.howToVerify(s) })),
    };
  }

  private howToVerify(s: SubmissionRow): string {
    if (s.state !== 'anchored') return `Not anchored on ${s.backend} yet (state ${s.state}).`;
    const b = this.backends.find((x) => x.name === s.backend);
    const a = { tx_hash: s.tx_hash, block_number: s.block_number === null ? null : Number(s.block_number), block_hash: s.block_hash, from: s.from_address, root: s.root };
    return b ? b.verify(a) : `Anchored on ${s.backend} (no longer configured here) in transaction ${s.tx_hash}, block ${a.block_number}.`;
  }
}

export const TREE = {
  algorithm: 'rfc6962-sha256',
  leaf: 'SHA-256(0x00 || leaf), each leaf the 32 bytes of an artifact hash, in the order listed',
  node: 'SHA-256(0x01 || left || right)',
  split: 'a tree of n > 1 leaves splits at k, the largest power of two smaller than n: left = first k leaves, right = the rest',
  inclusion_proof: 'RFC 6962 audit path (RFC 9162 section 2.1.3), sibling hashes nearest the leaf first',
} as const;

function chainAnchor(s: SubmissionRow): ChainAnchor {
  const anchored = s.state === 'anchored';
  return {
    backend: s.backend,
    type: s.type,
    chain_id: Number(s.chain_id),
    state: s.state,
    from: s.from_address,
    tx_hash: anchored ? s.tx_hash : null,
    block_number: anchored && s.block_number !== null ? Number(s.block_number) : null,
    block_hash: anchored ? s.block_hash : null,
    anchored_at: s.anchored_at ? s.anchored_at.toISOString() : null,
  };
}

/** anchored once any chain holds the root; failed when every chain's last attempt failed; else pending. */
function stateOf(anchors: ChainAnchor[], configured = true): AnchorState {
  if (anchors.some((a) => a.state === 'anchored')) return 'anchored';
  if (anchors.length === 0) return configured ? 'pending' : 'not_anchored';
  return anchors.every((a) => a.state === 'failed') ? 'failed' : 'pending';
}

/**
 * The backends the configuration names: each EVM chain (with the anchoring key) and the Solana cluster. Each
 * backend's chain library loads only where it is configured.
 */
export async function anchorBackends(config: AnchorsConfig): Promise<AnchorBackend[]> {
  const out: AnchorBackend[] = [];
  if (config.privateKey && config.chains.length) {
    const { EvmAnchorChain } = await import('./evm.ts');
    for (const c of config.chains) out.push(new EvmAnchorChain(c, config.privateKey));
  }
  if (config.solana) out.push(await (await import('./solana.ts')).SolanaAnchor.create(config.solana));
  return out;
}
