import { InvalidArgumentError, type Command } from 'commander';
import type { NewWebhook, Webhook, WebhookDelivery, WebhookEventType } from '@svc/shared/client';
import { context, sessionClient } from '../context.ts';
import { fields, table } from '../output.ts';

/** The event types a webhook may subscribe to (POST /v1/webhooks); the gateway refuses any other. */
function collectEvents(value: string, previous: string[]): string[] {
  const out = [...previous];
  for (const e of value.split(',').map((x) => x.trim()).filter(Boolean)) if (!out.includes(e)) out.push(e);
  if (out.length === 0) throw new InvalidArgumentError('give at least one event type');
  return out;
}

function httpUrl(value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new InvalidArgumentError('expected an http(s) URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new InvalidArgumentError('expected an http(s) URL');
  return value;
}

const eventsText = (events: readonly string[] | null) => (events === null ? 'every event' : events.join(','));

function webhooksTable(hooks: readonly Webhook[]): string {
  if (hooks.length === 0) return 'No webhooks. Create one with `svc webhooks create <https://...>`.';
  return table(
    ['ID', 'URL', 'EVENTS', 'ENABLED', 'CREATED', 'DESCRIPTION'],
    hooks.map((h) => [h.id, h.url, eventsText(h.events), h.enabled ? 'yes' : `no (since ${h.disabled_at ?? '?'})`, h.created_at, h.description ?? '-']),
  );
}

function createdText(h: NewWebhook): string {
  return [
    `Created webhook ${h.id}.`,
    fields([
      ['url', h.url],
      ['events', eventsText(h.events)],
    ]),
    '',
    'Signing secret (shown once and cannot be retrieved again; store it now). Deliveries are signed with it',
    '(Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature headers):',
    `  ${h.secret}`,
    '',
    `Send a test event: svc webhooks test ${h.id}`,
  ].join('\n');
}

function deliveriesTable(ds: readonly WebhookDelivery[]): string {
  if (ds.length === 0) return 'No delivery attempts yet.';
  return table(
    ['AT', 'EVENT', 'TYPE', 'ATTEMPT', 'STATUS', 'OUTCOME', 'NEXT ATTEMPT', 'ERROR'],
    ds.map((d) => [d.at, d.event_id, d.event_type, String(d.attempt), d.status_code === null ? '-' : String(d.status_code), d.outcome, d.next_attempt_at ?? '-', d.error ?? '-']),
  );
}

export function registerWebhooks(program: Command): void {
  const webhooks = program.command('webhooks').description('Webhooks: list, create, send a test event, see deliveries, delete');

  webhooks
    .command('list')
    .description('Every webhook of the account, without secrets')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const hooks = await sessionClient(ctx).client.webhooks();
      ctx.out.result(hooks, () => webhooksTable(hooks));
    });

  webhooks
    .command('create')
    .argument('<url>', 'the http(s) URL that receives the POSTs', httpUrl)
    .description('Create a webhook; its signing secret is printed once')
    .option('--event <type>', 'an event type to deliver (repeatable or comma-separated; default: every event), e.g. balance_low', collectEvents, [])
    .option('--description <text>', 'a note for yourself')
    .action(async (url: string, opts: { event: string[]; description?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const { client } = sessionClient(ctx);
      const hook = await client.createWebhook({
        url,
        ...(opts.event.length ? { events: opts.event as WebhookEventType[] } : {}),
        ...(opts.description !== undefined ? { description: opts.description } : {}),
      });
      ctx.out.result(hook, () => createdText(hook));
    });

  webhooks
    .command('test <webhook_id>')
    .description('Queue a synthetic webhook_test event for the webhook')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const ev = await sessionClient(ctx).client.testWebhook(id);
      ctx.out.result(ev, () => `Queued ${ev.type} event ${ev.id} for ${ev.webhook_id}. See its delivery with: svc webhooks deliveries ${ev.webhook_id}`);
    });

  webhooks
    .command('deliveries <webhook_id>')
    .description('The last 50 delivery attempts of the webhook, newest first')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const ds = await sessionClient(ctx).client.webhookDeliveries(id);
      ctx.out.result(ds, () => deliveriesTable(ds));
    });

  webhooks
    .command('delete <webhook_id>')
    .description('Disable the webhook: no more deliveries')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const hook = await sessionClient(ctx).client.deleteWebhook(id);
      ctx.out.result(hook, () => `Disabled webhook ${hook.id} (${hook.url}).`);
    });
}
