import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { ServiceError, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { html, sendPage, type Page } from '../../http/pages.ts';
import type { Anchors } from '../anchors/service.ts';
import type { CallsService } from '../calls/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { Receipts } from '../proofs/receipts.ts';
import { verifyScript } from './assets.ts';
import { callPage } from './call-page.ts';
import { PAGE_STYLE } from './parts.ts';
import { ANCHORED_KINDS, receiptPage } from './receipt-page.ts';

export interface PagesDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  calls: CallsService;
  anchors: Anchors;
  publicUrl: URL;
}

const IdParam = z.string().min(1).max(64);
const HtmlPage = z.string().describe('An HTML page.');
const NotFoundPage = z.string().describe('An HTML page: no such record (unknown, and for receipts also unshared, ids answer the same).');

/**
 * The public pages of signed artifacts: a sealed call (`/c/{id}`) and a shared receipt (`/r/{request_id}`).
 * Server-rendered with the pages template; each loads the bundled verification script from this origin,
 * which checks the signature (and a call's commitment) in the visitor's browser.
 */
export function pagesRoutes(app: FastifyInstance, d: PagesDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];
  const pub = { auth: 'public' as const };
  const signer = d.signer.address;
  const receipts = new Receipts(d.db, d.clock, signer, d.publicUrl.href.replace(/\/+$/, ''));

  /** A page with the verification script (a page still renders, and says so, if the script cannot be built). */
  const send = async (reply: FastifyReply, page: Omit<Page, 'scriptSrc' | 'style'>) => {
    return sendPage(reply, { ...page, style: PAGE_STYLE, scriptSrc: await verifyScript.src(reply) });
  };
  const notFound = (reply: FastifyReply, what: string) =>
    sendPage(reply, { status: 404, title: 'Not found', style: PAGE_STYLE, body: html`<h1>Not found</h1><p>No ${what} here: the link is wrong, or it is not public.</p>` });
  const missing = (e: unknown) => e instanceof ServiceError && e.type === 'not_found';

  r.get(
    '/c/:id',
    {
      config: pub,
      schema: {
        tags,
        summary: 'The page of a sealed call (HTML): commitment, receipt, anchor, the text once revealed; verified in the browser (GET /v1/calls/public/{id} as HTML)',
        params: z.object({ id: IdParam }),
        produces: ['text/html'],
        response: { 200: HtmlPage, 404: NotFoundPage },
      },
    },
    async (req, reply) => {
      let call;
      try {
        call = await d.calls.publicView(req.params.id);
      } catch (e) {
        if (missing(e)) return notFound(reply, 'sealed call');
        throw e;
      }
      return send(reply, callPage(call, signer));
    },
  );

  r.get(
    '/r/:request_id',
    {
      config: pub,
      schema: {
        tags,
        summary: 'The page of a shared receipt (HTML), verified in the browser (GET /v1/receipts/shared/{id} as HTML); unshared and unknown ids are the same 404',
        params: z.object({ request_id: IdParam }),
        produces: ['text/html'],
        response: { 200: HtmlPage, 404: NotFoundPage },
      },
    },
    async (req, reply) => {
      let row;
      try {
        row = await receipts.shared(req.params.request_id);
      } catch (e) {
        if (missing(e)) return notFound(reply, 'shared receipt');
        throw e;
      }
      const anchor = ANCHORED_KINDS.has(row.kind) ? await d.anchors.field(row.kind, row.id, row.hash) : null;
      return send(reply, receiptPage(receipts.publicView(row), signer, anchor));
    },
  );

  verifyScript.route(
    app,
    "The public pages' verification script (EIP-191 recovery, sha256 commitment, RFC 6962 inclusion proof), bundled from @noble/curves and @noble/hashes; immutable under its ?v= content hash",
    tags,
  );
}
