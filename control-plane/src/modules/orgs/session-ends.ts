import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';

export const ORG_SESSIONS_CHANNEL = 'svc_org_sessions';

interface Tracked {
  orgId: string;
  memberAccountId: string;
  end: () => void;
}

/**
 * Ends requests still open under a switched session (a usage stream) when its member leaves or is removed,
 * or its org is deleted, in every control-plane process. A revoked session is refused on its next request
 * anyway (session lookups read the database); this reaches the ones already running. The notice is sent
 * inside the revoking transaction, so Postgres delivers it only once that commits.
 */
export class OrgSessionEnds {
  private readonly open = new Set<Tracked>();
  private unlisten: (() => Promise<void>) | undefined;

  async start(database: Database): Promise<void> {
    this.unlisten = await database.listen(ORG_SESSIONS_CHANNEL, (payload) => this.ended(payload));
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.open.clear();
  }

  /** Calls `end` if the request's org session ends while it runs; returns the function that stops watching. */
  track(org: { id: string; memberAccountId: string }, end: () => void): () => void {
    const t: Tracked = { orgId: org.id, memberAccountId: org.memberAccountId, end };
    this.open.add(t);
    return () => void this.open.delete(t);
  }

  /** Announces on `db` (the revoking transaction) that one member's org sessions, or all of an org's, ended. */
  async announce(db: Kysely<DB>, orgId: string, memberAccountId?: string): Promise<void> {
    const payload = JSON.stringify(memberAccountId ? [orgId, memberAccountId] : [orgId]);
    await sql`select pg_notify(${ORG_SESSIONS_CHANNEL}, ${payload})`.execute(db);
  }

  /**
   * Watches every request made by a switched session while it runs; registered right after the auth hook.
   * A response already under way (a stream) is ended; one not yet started finishes as it would.
   */
  register(app: FastifyInstance): void {
    app.addHook('onRequest', (req, reply, done) => {
      const p = req.principal;
      if (p.kind === 'session' && p.org) {
        const stop = this.track({ id: p.org.id, memberAccountId: p.org.memberAccountId }, () => {
          if (reply.raw.headersSent && !reply.raw.writableEnded) reply.raw.end();
        });
        reply.raw.once('close', stop);
      }
      done();
    });
  }

  private ended(payload: string): void {
    let target: unknown;
    try {
      target = JSON.parse(payload);
    } catch {
      return;
    }
    if (!Array.isArray(target) || typeof target[0] !== 'string') return;
    const [orgId, member] = target as [string, string | undefined];
    for (const t of this.open) {
      if (t.orgId !== orgId || (member !== undefined && t.memberAccountId !== member)) continue;
      this.open.delete(t);
      t.end();
    }
  }
}
