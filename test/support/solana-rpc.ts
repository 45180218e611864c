import { createPublicKey, randomBytes, verify } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { getAddressEncoder, getBase58Decoder, getCompiledTransactionMessageDecoder, getTransactionDecoder, type Address } from '@solana/kit';

/**
 * A local Solana cluster's JSON-RPC, as far as the anchor backend and a verifier use it (no validator can run
 * here): getLatestBlockhash, getBlockHeight, sendTransaction (base64 wire transactions: every signature is
 * checked with ed25519 over the message, the blockhash must be known and unexpired, a transaction seen
 * before is refused as "already been processed", as a validator answers), getSignatureStatuses and
 * getTransaction. The test moves the cluster: `advance(n)` slots, `finalize()`, `down` to refuse every call.
 *
 * Token transfers (`addTokenTransfer`) are answered by getTransaction in the documented `json` encoding
 * (https://solana.com/docs/rpc/http/gettransaction): `slot`, `blockTime`, `version`, `meta` with `err`, `status`,
 * `fee`, lamport balances, `preTokenBalances` and `postTokenBalances` (accountIndex, mint, owner, programId,
 * uiTokenAmount {amount, decimals, uiAmount, uiAmountString}), and `transaction` with `signatures` and a
 * `message` (accountKeys, header, instructions, recentBlockhash). A request with commitment `finalized` (the
 * default when none is named) does not see a transaction that is only confirmed (null, as a node answers).
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
  /**
   * A landed SPL token transfer of `amount` base units of `mint` to a token account owned by `owner`, whose
   * balance was `pre` (null: the account is opened by this transaction); `err` makes it a failed transaction.
   * Confirmed until `finalize()` unless `finalized`. Returns its signature (base58).
   */
  addTokenTransfer(t: { owner: string; mint: string; amount: bigint; pre?: bigint | null; decimals?: number; finalized?: boolean; err?: unknown }): string;
  close(): Promise<void>;
}

const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const randomAddress = () => b58.decode(randomBytes(32));

interface TokenTx {
  slot: number;
  status: 'confirmed' | 'finalized';
  body: (slotNow: number) => Record<string, unknown>;
}

/** The `json` encoding of a token transfer: the payer signs, its token account pays the owner's token account. */
function tokenTransferJson(signature: string, slot: number, t: Parameters<LocalSolana['addTokenTransfer']>[0]) {
  const decimals = t.decimals ?? 6;
  const [payer, source, dest, sourceOwner] = [randomAddress(), randomAddress(), randomAddress(), randomAddress()];
  const ui = (amount: bigint) => {
    const s = (Number(amount) / 10 ** decimals).toString();
    return { amount: amount.toString(), decimals, uiAmount: Number(s), uiAmountString: s };
  };
  const balance = (accountIndex: number, owner: string, amount: bigint) => ({ accountIndex, mint: t.mint, owner, programId: TOKEN_PROGRAM, uiTokenAmount: ui(amount) });
  const sourceBefore = t.amount + 1_000_000n;
  const pre = [balance(1, sourceOwner, sourceBefore), ...(t.pre === null || t.pre === undefined ? [] : [balance(2, t.owner, t.pre)])];
  const post = [balance(1, sourceOwner, sourceBefore - t.amount), balance(2, t.owner, (t.pre ?? 0n) + t.amount)];
  return {
    slot,
    blockTime: 1_760_000_000 + slot,
    version: 'legacy',
    meta: {
      err: t.err ?? null,
      status: t.err ? { Err: t.err } : { Ok: null },
      fee: 5000,
      preBalances: [1_000_000_000, 2_039_280, 2_039_280, 1_461_600, 1],
      postBalances: [999_995_000, 2_039_280, 2_039_280, 1_461_600, 1],
      innerInstructions: [],
      logMessages: [`Program ${TOKEN_PROGRAM} invoke [1]`, 'Program log: Instruction: TransferChecked', `Program ${TOKEN_PROGRAM} success`],
      preTokenBalances: pre,
      postTokenBalances: t.err ? pre : post,
      rewards: [],
      loadedAddresses: { writable: [], readonly: [] },
      computeUnitsConsumed: 6200,
    },
    transaction: {
      signatures: [signature],
      message: {
        accountKeys: [payer, source, dest, t.mint, TOKEN_PROGRAM],
        header: { numRequiredSignatures: 1, numReadonlySignedAccounts: 0, numReadonlyUnsignedAccounts: 2 },
        instructions: [{ programIdIndex: 4, accounts: [1, 3, 2, 0], data: b58.decode(Buffer.concat([Buffer.from([12]), Buffer.alloc(8), Buffer.from([decimals])])), stackHeight: null }],
        recentBlockhash: randomAddress(),
      },
    },
  };
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
  const tokenTxs = new Map<string, TokenTx>();
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
      const opts = (params[1] ?? {}) as { commitment?: string; encoding?: string };
      const token = tokenTxs.get(String(params[0]));
      if (token) {
        if (opts.encoding !== undefined && opts.encoding !== 'json') throw rpcError(-32602, `this local cluster answers token transfers in json encoding only, not ${opts.encoding}`);
        // A node's default commitment is finalized (clients such as @solana/kit leave the default out).
        if ((opts.commitment ?? 'finalized') === 'finalized' && token.status !== 'finalized') return null;
        return token.body(slot);
      }
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
    finalize: () => {
      landed.forEach((t) => (t.status = 'finalized'));
      tokenTxs.forEach((t) => (t.status = 'finalized'));
    },
    addTokenTransfer(t) {
      const signature = b58.decode(randomBytes(64));
      const at = slot;
      const body = tokenTransferJson(signature, at, t);
      tokenTxs.set(signature, { slot: at, status: t.finalized ? 'finalized' : 'confirmed', body: () => body });
      return signature;
    },
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
