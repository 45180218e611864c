import { Worker } from 'node:worker_threads';
import { privateKeyToAddress, signPersonalMessage, signReceipt, canonicalize, nativeSigning, type Hex, type ReceiptPayload, type SignedReceipt } from '@svc/shared';

type Pending = { payload: ReceiptPayload; canonical: string; resolve: (r: SignedReceipt) => void };

/**
 * The gateway's receipt signer (secp256k1, EIP-191). Also signs statements, proofs and reports.
 *
 * `signLater` signs on a worker thread: the receipts asked for in one turn of the event loop go in one
 * message, so under concurrent load the hashing and ECDSA (most of a receipt's cost) run beside the event
 * loop instead of on it. A lone request signs inline (`signReceipt`): two thread hops would cost it more
 * than they save. If the worker fails, everything signs inline.
 */
export class ReceiptSigner {
  readonly address: Hex;
  private worker: Worker | null = null;
  private gather: Pending[] = [];
  private readonly sent: Pending[][] = [];
  private started = false;
  /** Receipts the worker signed (the rest signed inline). */
  signedOffThread = 0;

  constructor(private readonly key: Hex) {
    this.address = privateKeyToAddress(key);
  }

  signReceipt(payload: Omit<ReceiptPayload, 'signer'>): SignedReceipt {
    return signReceipt(this.key, { ...payload, signer: this.address } as ReceiptPayload);
  }

  /** Same receipt as `signReceipt`, signed on the worker thread together with the others of this turn. */
  signLater(payload: Omit<ReceiptPayload, 'signer'>): Promise<SignedReceipt> | SignedReceipt {
    const worker = this.ensureWorker();
    if (!worker) return this.signReceipt(payload);
    const full = { ...payload, signer: this.address } as ReceiptPayload;
    const canonical = canonicalize(full);
    return new Promise<SignedReceipt>((resolve) => {
      if (this.gather.push({ payload: full, canonical, resolve }) === 1) setImmediate(() => this.flush());
    });
  }

  private ensureWorker(): Worker | null {
    if (this.worker || this.started || !nativeSigning) return this.worker;
    this.started = true;
    try {
      const w = new Worker(new URL('./sign-worker.mjs', import.meta.url), { workerData: { key: this.key }, execArgv: [] });
      w.unref();
      w.on('message', (out: Array<[Hex, Hex] | { error: string }>) => this.answered(out));
      w.on('error', () => this.fail());
      w.on('exit', () => this.fail());
      this.worker = w;
    } catch {
      this.worker = null;
    }
    return this.worker;
  }

  private flush(): void {
    const batch = this.gather;
    this.gather = [];
    if (batch.length === 0) return;
    if (!this.worker) return this.inline(batch);
    if (this.sent.push(batch) === 1) this.worker.ref(); // answers on their way keep the process alive; an idle worker does not
    this.worker.postMessage(batch.map((b) => b.canonical));
  }

  private answered(out: Array<[Hex, Hex] | { error: string }>): void {
    const batch = this.sent.shift() ?? [];
    if (this.sent.length === 0) this.worker?.unref();
    batch.forEach((b, i) => {
      const r = out[i];
      if (Array.isArray(r)) {
        this.signedOffThread++;
        b.resolve({ payload: b.payload, canonical: b.canonical, hash: r[0], signature: r[1] });
      } else b.resolve(signReceipt(this.key, b.payload));
    });
  }

  /** The worker is gone: what it had and what is gathered sign inline, and so does everything after. */
  private fail(): void {
    this.worker = null;
    for (const batch of this.sent.splice(0)) this.inline(batch);
    this.inline(this.gather.splice(0));
  }

  private inline(batch: Pending[]): void {
    for (const b of batch) b.resolve(signReceipt(this.key, b.payload));
  }

  /** Stops the worker (answers on their way are signed inline). */
  async close(): Promise<void> {
    const w = this.worker;
    this.fail();
    await w?.terminate();
  }

  /** Signs any JSON document as RFC 8785 canonical JSON; the answer carries what a verifier needs. */
  signDocument<T extends object>(document: T): { document: T; canonical: string; signature: Hex; signer: Hex; scheme: string } {
    const canonical = canonicalize(document);
    return { document, canonical, signature: signPersonalMessage(this.key, canonical), signer: this.address, scheme: 'eip191-personal_sign/rfc8785' };
  }
}
