import { createPublicKey, randomBytes, verify } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { getAddressEncoder, getBase58Decoder, getCompiledTransactionMessageDecoder, getTransactionDecoder, type Address } from '@solana/kit';

/**
 * A local Solana cluster's JSON-RPC, as far as the anchor backend and a verifier use it (no validator can run
 * here): getLatestBlockhash, getBlockHeight, sendTransaction (base64 wire transactions: every signature is
 * checked with ed25519 over the message, the blockhash must be known and unexpired, a transaction seen
 * before is refused as "already been processed", as a validator answers), getSignatureStatuses and
 * getTransaction. The test moves the cluster: `advance(n)` slots, `finalize()`, `down` to refuse every call.
 */
export interface LocalSolana {
  url: string;
  /** Slots (and block heights) pass. */
  advance(n: number): void;
  /** Every landed transaction becomes finalized. */
  finalize(): void;
  /** While true, every call answers HTTP 503. */
  down: boolean;
  /** Wire transactions received, by signature. */
  readonly landed: Map<string, { wire: Buffer; slot: number; status: 'confirmed' | 'finalized' }>;
  close(): Promise<void>;
}

const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');
const b58 = getBase58Decoder();
const addressBytes = (a: string) => Buffer.from(getAddressEncoder().encode(a as Address));

/** Signatures, message bytes and the compiled message of a wire transaction. */
export function decodeWire(wire: Buffer) {
  const tx = getTransactionDecoder().decode(wire);
  const message = getCompiledTransactionMessageDecoder().decode(tx.messageBytes);
  return { tx, message };
}

export async function startLocalSolana(): Promise<LocalSolana> {
  let slot = 1000;
  const blockhashes = new Map<string, number>(); // blockhash -> last valid block height
  const landed = new Map<string, { wire: Buffer; slot: number; status: 'confirmed' | 'finalized' }>();
  const state = { down: false };

  const methods: Record<string, (params: unknown[]) => unknown> = {
    getLatestBlockhash: () => {
      const blockhash = b58.decode(randomBytes(32));
      blockhashes.set(blockhash, slot + 150);
      return { context: { slot }, value: { blockhash, lastValidBlockHeight: slot + 150 } };
    },
    getBlockHeight: () => slot,
    sendTransaction: (params) => {
      const wire = Buffer.from(String(params[0]), 'base64');
      const { tx, message } = decodeWire(wire);
      const valid = blockhashes.get(message.lifetimeToken);
      if (valid === undefined || valid < slot) throw rpcError(-32002, 'Transaction simulation failed: Blockhash not found');
      for (const [addr, sig] of Object.entries(tx.signatures)) {
        const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519, addressBytes(addr)]), format: 'der', type: 'spki' });
        if (!sig || !verify(null, Buffer.from(tx.messageBytes), key, Buffer.from(sig))) throw rpcError(-32003, 'Transaction signature verification failure');
      }
      const signature = b58.decode(Object.values(tx.signatures)[0]!);
      if (landed.has(signature)) throw rpcError(-32002, 'Transaction simulation failed: This transaction has already been processed');
      landed.set(signature, { wire, slot, status: 'confirmed' });
      return signature;
    },
    getSignatureStatuses: (params) => ({
      context: { slot },
      value: (params[0] as string[]).map((s) => {
        const t = landed.get(s);
        return t ? { slot: t.slot, confirmations: t.status === 'finalized' ? null : slot - t.slot, err: null, status: { Ok: null }, confirmationStatus: t.status } : null;
      }),
    }),
    getTransaction: (params) => {
      const t = landed.get(String(params[0]));
      return t ? { slot: t.slot, blockTime: null, transaction: [t.wire.toString('base64'), 'base64'], meta: { err: null, fee: 5000 } } : null;
    },
  };

  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (state.down) {
        res.writeHead(503).end('down');
        return;
      }
      const call = JSON.parse(body) as { id: unknown; method: string; params?: unknown[] };
      let out: object;
      try {
        const m = methods[call.method];
        if (!m) throw rpcError(-32601, `Method not found: ${call.method}`);
        out = { jsonrpc: '2.0', id: call.id, result: m(call.params ?? []) };
      } catch (e) {
        const err = e as { code?: number; message: string };
        out = { jsonrpc: '2.0', id: call.id, error: { code: err.code ?? -32603, message: err.message } };
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    advance: (n) => void (slot += n),
    finalize: () => landed.forEach((t) => (t.status = 'finalized')),
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    landed,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

function rpcError(code: number, message: string): Error {
  return Object.assign(new Error(message), { code });
}
