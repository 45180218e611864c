import { createTRPCClient, createWSClient, wsLink, TRPCClientError } from '@trpc/client';
import WebSocket from 'ws';
import { CHANNEL_PATH, PROTOCOL_VERSION, ServerMessage, type JobFinish, type JobOutput } from '@svc/shared';
import type { AgentRouter } from '../../control-plane/src/fleet/channel.ts';

export interface ChannelHandlers {
  onMessage(msg: ServerMessage): void;
  runningJobs(): string[];
  /** The sandbox sessions this agent holds (Hello.sessions). */
  heldSessions(): string[];
  /** The number of the connection being opened (ConnectionParams.connection; see ConnectionNumbers). */
  connection(): number;
  /** A refusal retrying cannot fix (bad key, wrong protocol version). */
  onFatal(message: string): void;
  /** The control plane answered this connection's hello: the node is back on the channel. */
  onReady?(): void;
  /** The connection closed (a reconnect follows, with backoff). */
  onClosed?(): void;
  log(msg: string): void;
}

export const BACKOFF_FIRST_MS = 500;
export const BACKOFF_CAP_MS = 30_000;
/** The shortest wait: an agent never dials again in a tight loop. */
export const BACKOFF_FLOOR_MS = 100;

/**
 * Delay before reconnect attempt `attempt` (0 first): capped exponential backoff with full jitter. The ceiling
 * starts at 0.5 s and doubles per attempt up to 30 s; the delay is drawn from all of [0.1 s, ceiling], so the
 * agents a control-plane restart dropped together come back spread over the whole window rather than in a
 * wave at its upper half.
 */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** Math.max(0, attempt));
  return Math.round(BACKOFF_FLOOR_MS + random() * (ceiling - BACKOFF_FLOOR_MS));
}

/**
 * The reconnect attempts since the node was last on the channel. The count starts again only when a hello
 * is answered, not when a socket opens: a control plane that accepts connections and then drops them
 * (overloaded, restarting) sees the agent's waits keep growing instead of a reconnect every half second.
 */
export class Backoff {
  private attempts = 0;
  constructor(private readonly random: () => number = Math.random) {}
  /** The wait before the next attempt, which counts as one more. */
  next(): number {
    return backoffMs(this.attempts++, this.random);
  }
  /** The node is on the channel again. */
  reset(): void {
    this.attempts = 0;
  }
}

/** The tRPC error code of a failed call (UNAUTHORIZED, FORBIDDEN, ...), when the control plane gave one. */
const codeOf = (e: unknown): string | undefined => (e instanceof TRPCClientError ? (e.data as { code?: string } | undefined)?.code : undefined);

/**
 * How long a hello may go unanswered before the agent drops the connection and dials again (with its backoff).
 * A connection whose hello never gets an answer (lost on the way, or a control plane that never answers it)
 * would otherwise leave the node connected but never back.
 */
export const HELLO_TIMEOUT_MS = 15_000;

/** Wait before asking again for a job subscription the control plane ended. */
const RESUBSCRIBE_MS = 1000;

/**
 * The agent end of the channel: dials the control plane (so nodes behind NAT work), authenticates with the
 * node key in the connection params, reconnects with capped backoff, and on every (re)connect tells the
 * control plane which jobs it still runs and which sandbox sessions it still holds. Jobs arrive over a subscription; output goes back as mutations.
 */
export class Channel {
  private readonly ws: ReturnType<typeof createWSClient>;
  private readonly client: ReturnType<typeof createTRPCClient<AgentRouter>>;
  private sub: { unsubscribe(): void } | undefined;
  private wanted = false;
  /** The control plane has no `outputs` procedure (older than this agent): outputs go one per message. */
  private singleOutputs = false;
  private readonly backoff = new Backoff();
  /** The number of the open connection (0 while none is open): a hello's answer counts only on its own connection. */
  private open = 0;
  private opens = 0;

  constructor(
    url: string,
    nodeKey: string,
    agentVersion: string,
    private readonly h: ChannelHandlers,
    protocolVersion: number = PROTOCOL_VERSION,
  ) {
    const wsUrl = new URL(CHANNEL_PATH, url);
    wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';
    this.ws = createWSClient({
      url: wsUrl.toString(),
      WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
      connectionParams: () => ({ node_key: nodeKey, protocol_version: String(protocolVersion), agent_version: agentVersion, connection: String(h.connection()) }),
      retryDelayMs: () => this.backoff.next(),
      onOpen: () => {
        h.log('channel open');
        this.open = ++this.opens;
        // A subscription that a refusal ended (FORBIDDEN) is made again on the new connection.
        if (this.wanted && !this.sub) this.subscribe();
        this.hello(this.open, 0);
      },
      onClose: (cause) => {
        this.open = 0;
        h.log(`channel closed${cause?.code ? ` (${cause.code})` : ''}; reconnecting with backoff`);
        h.onClosed?.();
      },
    });
    this.client = createTRPCClient<AgentRouter>({ links: [wsLink({ client: this.ws })] });
  }

  /**
   * Tells the control plane which jobs and sessions this agent holds. A hello the control plane could not
   * answer (busy, restarting, a database error) is asked again on the same connection with the same capped
   * backoff; the node counts as back only once one is answered. Refusals are not retried here.
   */
  private hello(open: number, attempt: number): void {
    let answered = false;
    setTimeout(() => {
      if (answered || this.open !== open || !this.wanted) return;
      this.h.log(`hello not answered in ${HELLO_TIMEOUT_MS / 1000} s; dialling again`);
      this.ws.connection?.ws?.close(4000, 'hello not answered');
    }, HELLO_TIMEOUT_MS).unref();
    this.client.hello.mutate({ running_jobs: this.h.runningJobs(), sessions: this.h.heldSessions() }).then(
      (r) => {
        answered = true;
        if (this.open !== open) return;
        this.backoff.reset();
        if (r.cancelled.length) this.h.log(`control plane cancelled orphaned jobs: ${r.cancelled.join(', ')}`);
        this.h.onReady?.();
      },
      (e: unknown) => {
        answered = true;
        if (this.open !== open) return; // that connection is gone; the next one says hello itself
        const code = codeOf(e);
        if (code === 'UNAUTHORIZED' || code === 'PRECONDITION_FAILED' || code === 'FORBIDDEN') return this.fail(e);
        const wait = backoffMs(attempt);
        this.h.log(`hello not answered (${e instanceof Error ? e.message : String(e)}); asking again in ${wait} ms`);
        setTimeout(() => {
          if (this.open === open && this.wanted) this.hello(open, attempt + 1);
        }, wait).unref();
      },
    );
  }

  private fail(e: unknown): void {
    const code = codeOf(e);
    const message = e instanceof Error ? e.message : String(e);
    if (code === 'UNAUTHORIZED') this.h.onFatal(`the control plane refused the node key: ${message}`);
    else if (code === 'PRECONDITION_FAILED') this.h.onFatal(`the control plane refused this agent: ${message}`);
    else if (code === 'FORBIDDEN') {
      this.h.log(`the control plane refuses the node for now: ${message}; retrying with backoff`);
      this.sub?.unsubscribe();
      this.sub = undefined;
    }
    else this.h.log(`channel error: ${message}`);
  }

  start(): void {
    this.wanted = true;
    this.subscribe();
  }

  private subscribe(): void {
    const sub = this.client.jobs.subscribe(undefined, {
      onData: (data) => {
        const msg = ServerMessage.safeParse(data);
        if (msg.success) this.h.onMessage(msg.data);
        else this.h.log(`ignored a malformed message from the control plane`);
      },
      onError: (e) => this.fail(e),
      // The control plane ended the subscription while the connection stays (another channel of this node
      // took over, or the control plane is stopping): ask again shortly, on this connection or the next.
      onStopped: () => {
        if (this.sub !== sub) return;
        this.sub = undefined;
        this.h.log('the control plane ended the job subscription; subscribing again');
        setTimeout(() => {
          if (this.wanted && !this.sub) this.subscribe();
        }, RESUBSCRIBE_MS).unref();
      },
    });
    this.sub = sub;
  }

  /**
   * Outputs in one message; one at a time to a control plane from before `outputs` (it answers NOT_FOUND,
   * after which this connection's client asks it no more).
   */
  async outputs(batch: JobOutput[]): Promise<unknown> {
    if (this.singleOutputs) {
      for (const o of batch) await this.client.output.mutate(o);
      return undefined;
    }
    try {
      return await this.client.outputs.mutate(batch);
    } catch (e) {
      if ((e as { data?: { code?: string } }).data?.code !== 'NOT_FOUND') throw e;
      this.singleOutputs = true;
      return this.outputs(batch);
    }
  }

  finish(f: JobFinish): Promise<unknown> {
    return this.client.finish.mutate(f);
  }

  close(): void {
    this.wanted = false;
    this.sub?.unsubscribe();
    this.ws.close();
  }
}
