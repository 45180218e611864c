import { ServiceError, invalid, newId } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { AgentsDeps } from './deps.ts';
import { MAX_INPUT_BYTES } from './hooks.ts';
import type { AgentRunner } from './runner.ts';
import { agentOf } from './store.ts';

/** The largest message: a mailbox-triggered run gets it as SVC_INPUT (one environment value). */
export const MAX_MESSAGE_BYTES = MAX_INPUT_BYTES;
/** Unread messages a mailbox holds; a delivery beyond is refused (409 mailbox_full) until some are consumed. */
export const MAILBOX_UNREAD_CAP = 1000;
/** Read messages a mailbox keeps (the newest); older read ones are deleted when messages are consumed. */
export const MAILBOX_READ_KEPT = 100;
/** Messages one read returns at most (oldest first). */
export const MAILBOX_PAGE = 100;

const contentAad = (id: string) => `agent_messages.content:${id}`;

/**
 * Agent mailboxes: an API key of the account delivers a message to one of the account's agents; messages are
 * sealed at rest and read (optionally consumed: marked read) with an API key of the account. A delivery to an
 * agent with its mailbox trigger on also queues a run with the message as SVC_INPUT, which the leader's loop
 * starts; the message stays in the mailbox.
 */
export class Mailboxes {
  constructor(
    private readonly d: AgentsDeps,
    private readonly runner: AgentRunner,
  ) {}

  async deliver(p: KeyPrincipal, toId: string, content: string, fromAgentId: string | undefined) {
    const bytes = Buffer.byteLength(content);
    if (bytes > MAX_MESSAGE_BYTES) throw new ServiceError('payload_too_large', `content: a message is limited to ${MAX_MESSAGE_BYTES} bytes (it becomes a run's SVC_INPUT)`, { param: 'content' });
    const from = fromAgentId ?? (await this.senderOf(p));
    if (fromAgentId !== undefined) {
      const known = await this.d.db.selectFrom('agents').select('id').where('id', '=', fromAgentId).where('account_id', '=', p.accountId).executeTakeFirst();
      if (!known) throw invalid(`from_agent_id: this account has no agent ${fromAgentId}`, 'from_agent_id');
    }
    const now = this.d.clock.now();
    return this.d.db.transaction().execute(async (trx) => {
      const a = await agentOf(trx, p.accountId, toId, true);
      const unread = await this.unreadCount(trx, a.id);
      if (unread >= MAILBOX_UNREAD_CAP) {
        throw new ServiceError('conflict', `Agent ${a.id}'s mailbox holds ${unread} unread messages, its limit; read them with consume=true first`, { reason: 'mailbox_full', limit: MAILBOX_UNREAD_CAP });
      }
      let runId: string | null = null;
      let skipped: { type: string; message: string } | null = null;
      if (a.mailbox_trigger) {
        try {
          await this.runner.admit(trx, a, { reserveCap: true });
          runId = (await this.runner.queue(trx, a, 'mailbox', content)).id;
        } catch (e) {
          if (!(e instanceof ServiceError)) throw e;
          skipped = { type: String(e.extra.reason ?? e.type), message: e.message };
        }
      }
      const id = newId('amsg_');
      await trx
        .insertInto('agent_messages')
        .values({ id, agent_id: a.id, account_id: p.accountId, from_agent_id: from, content_sealed: this.d.sealer.seal(content, contentAad(id)), bytes, run_id: runId, created_at: now, read_at: null })
        .execute();
      return { id, object: 'agent.message' as const, agent_id: a.id, from_agent_id: from, bytes, created_at: now.toISOString(), run_id: runId, run_skipped: skipped };
    });
  }

  /** The oldest MAILBOX_PAGE messages (unread only with `unreadOnly`), opened; `consume` marks them read. */
  async read(accountId: string, agentId: string, opts: { consume: boolean; unreadOnly: boolean }) {
    const a = await agentOf(this.d.db, accountId, agentId);
    let q = this.d.db.selectFrom('agent_messages').selectAll().where('agent_id', '=', a.id);
    if (opts.unreadOnly) q = q.where('read_at', 'is', null);
    const rows = await q.orderBy('seq').limit(MAILBOX_PAGE).execute();
    const now = this.d.clock.now();
    const fresh = rows.filter((r) => r.read_at === null).map((r) => r.id);
    if (opts.consume && fresh.length) {
      await this.d.db.transaction().execute(async (trx) => {
        await trx.updateTable('agent_messages').set({ read_at: now }).where('id', 'in', fresh).where('read_at', 'is', null).execute();
        const keep = trx.selectFrom('agent_messages').select('id').where('agent_id', '=', a.id).where('read_at', 'is not', null).orderBy('seq', 'desc').limit(MAILBOX_READ_KEPT);
        await trx.deleteFrom('agent_messages').where('agent_id', '=', a.id).where('read_at', 'is not', null).where('id', 'not in', keep).execute();
      });
    }
    const messages = rows.map((r) => ({
      id: r.id,
      object: 'agent.message' as const,
      from_agent_id: r.from_agent_id,
      content: this.d.sealer.open(r.content_sealed, contentAad(r.id)).toString('utf8'),
      bytes: r.bytes,
      run_id: r.run_id,
      created_at: r.created_at.toISOString(),
      read_at: (r.read_at ?? (opts.consume ? now : null))?.toISOString() ?? null,
    }));
    return { agent_id: a.id, messages, unread: await this.unreadCount(this.d.db, a.id) };
  }

  private async unreadCount(db: AgentsDeps['db'], agentId: string): Promise<number> {
    const r = await db.selectFrom('agent_messages').select((eb) => eb.fn.countAll<number>().as('n')).where('agent_id', '=', agentId).where('read_at', 'is', null).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  /** The agent whose key (or a key below it) sends: a run's program writing to another agent. */
  private async senderOf(p: KeyPrincipal): Promise<string | null> {
    const r = await this.d.db.selectFrom('agents').select('id').where('account_id', '=', p.accountId).where('key_id', 'in', p.chain).executeTakeFirst();
    return r?.id ?? null;
  }
}
