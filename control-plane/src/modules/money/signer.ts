import { Worker } from 'node:worker_threads';
import { stallTrace } from '../platform/stall-trace.ts';
import {
  canonicalize,
  nativeSigning,
  privateKeyToAddress,
  signPersonalMessage,
  signPersonalMessagePrepared,
  signReceipt,
  type Hex,
  type PreparedNonce,
  type ReceiptPayload,
  type SignedReceipt,
  withSigner,
} from '@svc/shared';

type Pending = { payload: ReceiptPayload; canonical: string; resolve: (r: SignedReceipt) => void };
/** `took`: when the worker prepared the nonces (epoch ms, performance.timeOrigin + now on its side), for the stall trace. */
type Answer = { signed: Array<[Hex, Hex] | { error: string }> } | { nonces: PreparedNonce[]; took?: [number, number] };

/** Nonces kept ready for inline signing; below LOW the worker is asked for BATCH more (~50 µs of its time each). */
const POOL_LOW = 256;
const POOL_BATCH = 512;

/**
 * The gateway's receipt signer (secp256k1, EIP-191). Also signs statements, proofs and reports.
 *
 * Two ways to sign, both beside a worker thread (`sign-worker.mjs`):
 * - `signReceipt`, inline. ECDSA's cost is the point multiplication k·G for its nonce k, which does not
 *   depend on the message, so the worker prepares nonces ahead and a receipt costs its hashing and one
 *   multiplication mod n (`signPersonalMessagePrepared`). Each nonce is taken from the pool once. With the
 *   pool empty (before `warm()`, just after it, or without the worker) it signs the usual way, with an RFC 6979 nonce.
 * - `signLater`, on the worker: the receipts asked for in one turn of the event loop go in one message and
 *   are signed there whole, hashing included, so under concurrent load the event loop does none of it. The
 *   worker signs with nonces it prepares for itself in batches (about a quarter less of its time per
 *   receipt than RFC 6979's, whose k·G and k⁻¹ are done one at a time), or RFC 6979's with preparedNonces
 *   off. A lone request signs inline instead: two thread hops would cost it more than they save.
 * Both kinds of signature verify the same way. If the worker fails, everything signs inline.
 *
 * A prepared nonce is as secret as the key (the key follows from it). The pools (this thread's and the
 * worker's) live in this process's memory only; a process cloned with its memory (a VM snapshot restored twice) would sign with the same
 * nonces twice and give the key away, which RFC 6979 signing cannot: such deployments set
 * SVC_PREPARED_NONCES=false.
 */
export class ReceiptSigner {
  readonly address: Hex;
  private worker: Worker | null = null;
  private started = false;
  private gather: Pending[] = [];
  private readonly sent: Pending[][] = [];
  private nonces: PreparedNonce[] = [];
  private asked = false;
  private warmed = false;
  private closed = false;
  private readonly waiting: Array<() => void> = [];
  /** Receipts the worker signed. */
  signedOffThread = 0;
  /** Signatures made inline with a prepared nonce. */
  signedPrepared = 0;

  /**
   * `preparedNonces: false`: every signature uses an RFC 6979 nonce, inline and on the worker.
   * `warmOnFirstUse`: the first signature starts `warm` (the worker thread and its nonces), so an idle
   * process holds no worker; that signature and those before the first nonces arrive use RFC 6979's.
   */
  constructor(
    private readonly key: Hex,
    private readonly opts: { preparedNonces?: boolean; warmOnFirstUse?: boolean } = {},
  ) {
    this.address = privateKeyToAddress(key);
  }

  signReceipt(payload: Omit<ReceiptPayload, 'signer'>): SignedReceipt {
    return signReceipt(this.signText, withSigner(payload, this.address));
  }

  /** A receipt signed on the worker thread together with the others of this turn. */
  signLater(payload: Omit<ReceiptPayload, 'signer'>): Promise<SignedReceipt> | SignedReceipt {
    if (this.opts.warmOnFirstUse && !this.warmed) void this.warm();
    const worker = this.closed ? null : this.ensureWorker();
    if (!worker) return this.signReceipt(payload);
    const full = withSigner(payload, this.address);
    const canonical = canonicalize(full);
    return new Promise<SignedReceipt>((resolve) => {
      if (this.gather.push({ payload: full, canonical, resolve }) === 1) setImmediate(() => this.flush());
    });
  }

  /** Signs any JSON document as RFC 8785 canonical JSON; the answer carries what a verifier needs. */
  signDocument<T extends object>(document: T): { document: T; canonical: string; signature: Hex; signer: Hex; scheme: string } {
    const canonical = canonicalize(document);
    return { document, canonical, signature: this.signText(canonical), signer: this.address, scheme: 'eip191-personal_sign/rfc8785' };
  }

  /**
   * Starts preparing nonces (until then, and without it, inline signatures use RFC 6979 nonces); resolves
   * once some are ready or the worker cannot run. The gateway has it start with the first signature.
   */
  warm(): Promise<void> {
    if (this.nonces.length > 0 || this.opts.preparedNonces === false || this.closed) return Promise.resolve();
    this.warmed = true;
    this.ask();
    if (!this.asked) return Promise.resolve();
    const ready = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.keepAlive(); // someone waits for the answer
    return ready;
  }

  /** Prepared nonces in the pool now. */
  get ready(): number {
    return this.nonces.length;
  }

  /** Inline EIP-191 signature: with a prepared nonce while the pool has one (only after `warm`), else RFC 6979's. */
  private readonly signText = (text: string): Hex => {
    if (this.opts.warmOnFirstUse && !this.warmed) void this.warm();
    const nonce = this.nonces.pop();
    if (this.nonces.length < POOL_LOW && this.warmed) this.ask();
    const signature = nonce ? signPersonalMessagePrepared(text, nonce) : null;
    if (!signature) return signPersonalMessage(this.key, text);
    this.signedPrepared++;
    return signature;
  };

  private ask(): void {
    if (this.asked || this.closed) return;
    const worker = this.ensureWorker();
    if (!worker) return this.wake();
    this.asked = true;
    worker.postMessage({ nonces: POOL_BATCH });
  }

  private wake(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
    this.keepAlive();
  }

  /** The worker keeps the process alive only while someone waits for it (a receipt, `warm`, or `close`). */
  private keepAlive(): void {
    if (this.sent.length > 0 || this.waiting.length > 0 || this.closed) this.worker?.ref(); // closing: until it has ended
    else this.worker?.unref();
  }

  private ensureWorker(): Worker | null {
    if (this.worker || this.started || !nativeSigning) return this.worker;
    this.started = true;
    try {
      const w = new Worker(new URL('./sign-worker.mjs', import.meta.url), { workerData: { key: this.key, prepared: this.opts.preparedNonces !== false }, execArgv: [] });
      w.on('message', (m: Answer) => {
        const t0 = stallTrace.enabled ? performance.now() : 0;
        if ('nonces' in m) {
          if (m.took) stallTrace.span('signer_prepare', m.took[0] - performance.timeOrigin, m.took[1] - performance.timeOrigin);
          this.prepared(m.nonces);
        }
        else this.answered(m.signed);
        stallTrace.span('signer_answer', t0);
      });
      w.on('error', () => this.fail());
      w.on('exit', () => this.fail());
      w.unref(); // after the listeners: adding a 'message' listener refs the worker's port again
      this.worker = w;
    } catch {
      this.worker = null;
    }
    return this.worker;
  }

  private prepared(batch: PreparedNonce[]): void {
    this.asked = false;
    if (this.closed) return; // an answer already on its way when the signer closed is dropped
    for (const n of batch) this.nonces.push(n);
    this.wake();
    if (this.nonces.length < POOL_LOW) this.ask();
  }

  private flush(): void {
    const batch = this.gather;
    this.gather = [];
    if (batch.length === 0) return;
    if (!this.worker || this.closed) return this.inline(batch);
    this.sent.push(batch);
    this.keepAlive();
    this.worker.postMessage({ sign: batch.map((b) => b.canonical) });
  }

  private answered(out: Array<[Hex, Hex] | { error: string }>): void {
    const batch = this.sent.shift() ?? [];
    this.keepAlive();
    batch.forEach((b, i) => {
      const r = out[i];
      if (Array.isArray(r)) {
        this.signedOffThread++;
        b.resolve({ payload: b.payload, canonical: b.canonical, hash: r[0], signature: r[1] });
      } else b.resolve(signReceipt(this.signText, b.payload));
    });
  }

  /** The worker is gone: what it had and what is gathered sign inline, and so does everything after. */
  private fail(): void {
    this.worker = null;
    this.asked = false;
    this.wake();
    for (const batch of this.sent.splice(0)) this.inline(batch);
    this.inline(this.gather.splice(0));
  }

  private inline(batch: Pending[]): void {
    for (const b of batch) b.resolve(signReceipt(this.signText, b.payload));
  }

  /**
   * Stops the worker and forgets the prepared nonces. The worker is asked to end after the work it has
   * (answers on their way still arrive; anything it leaves is signed inline) rather than terminated: a
   * thread stopped inside a libsecp256k1 call can abort the whole process (node-addon-api's
   * "terminate called after throwing an instance of 'Napi::Error'").
   */
  async close(): Promise<void> {
    this.closed = true;
    this.nonces = [];
    const w = this.worker;
    if (!w) return this.fail();
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    w.ref();
    w.postMessage({ exit: true });
    const force = setTimeout(() => void w.terminate(), 10_000); // a worker that does not end by itself
    await exited;
    clearTimeout(force);
  }
}
