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
  log(msg: string): void;
}

export const BACKOFF_FIRST_MS = 500;
export const BACKOFF_CAP_MS = 30_000;

/**
 * Delay before reconnect attempt `attempt` (0 first): capped exponential backoff with jitter. The ceiling
 * starts at 0.5 s and doubles per attempt up to 30 s; the delay is drawn from the upper half of it
 * ([ceiling/2, ceiling]) so a control-plane restart does not get every agent back at the same instant.
 */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** Math.max(0, attempt));
  return Math.round(base / 2 + random() * (base / 2));
}

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
      retryDelayMs: backoffMs,
      onOpen: () => {
        h.log('channel open');
        // A subscription that a refusal ended (FORBIDDEN) is made again on the new connection.
        if (this.wanted && !this.sub) this.subscribe();
        void this.client.hello
          .mutate({ running_jobs: h.runningJobs(), sessions: h.heldSessions() })
          .then((r) => r.cancelled.length && h.log(`control plane cancelled orphaned jobs: ${r.cancelled.join(', ')}`))
          .catch((e: unknown) => this.fail(e));
      },
      onClose: (cause) => h.log(`channel closed${cause?.code ? ` (${cause.code})` : ''}; reconnecting with backoff`),
    });
    this.client = createTRPCClient<AgentRouter>({ links: [wsLink({ client: this.ws })] });
  }

  private fail(e: unknown): void {
    const code = e instanceof TRPCClientError ? (e.data as { code?: string } | undefined)?.code : undefined;
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
