import { useState } from 'preact/hooks';
import { api, data, type Res } from '../api.ts';
import { timeZone, when } from '../format.ts';
import { ConfirmButton, SecretOnce, useOutcome, TextField } from '../ui/actions.tsx';
import { ListOf, useLoad } from '../ui/load.tsx';
import { DataTable } from '../ui/table.tsx';

type Webhook = Res<'/v1/webhooks', 'get'>[number];

/** Webhooks: create (the signing secret shown once), send a test event, the last 50 deliveries, disable. */
export function Webhooks() {
  const hooks = useLoad(() => data(api.GET('/v1/webhooks')));
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [secret, setSecret] = useState<string | null>(null);
  const out = useOutcome();
  return (
    <section>
      <h1>Webhooks</h1>
      {secret ? (
        <SecretOnce label="The webhook's signing secret" secret={secret} note={<p class="muted">Verify deliveries with any Standard Webhooks library.</p>} onDone={() => setSecret(null)} />
      ) : (
        <form
          class="card"
          aria-label="Create a webhook"
          onSubmit={(e) => {
            e.preventDefault();
            void out.run(async () => {
              const w = await data(api.POST('/v1/webhooks', { body: { url: url.trim(), ...(description.trim() ? { description: description.trim() } : {}) } }));
              setSecret(w.secret);
              setUrl('');
              hooks.reload();
            });
          }}
        >
          <h2>Create a webhook</h2>
          <div class="grid">
            <TextField label="URL" id="w-url" value={url} set={setUrl} type="url" required />
            <TextField label="Description (optional)" id="w-description" value={description} set={setDescription} />
          </div>
          <button type="submit" class="primary">
            Create webhook
          </button>
        </form>
      )}
      {out.view}
      <h2>Your webhooks</h2>
      <ListOf load={hooks} what="webhooks" empty="No webhooks yet.">
        {(list) => (
          <ul class="rows" data-list="webhooks">
            {list.map((w) => (
              <WebhookRow key={w.id} hook={w} onChange={hooks.reload} />
            ))}
          </ul>
        )}
      </ListOf>
    </section>
  );
}

function WebhookRow(props: { hook: Webhook; onChange: () => void }) {
  const w = props.hook;
  const [open, setOpen] = useState(false);
  const deliveries = useLoad(() => (open ? data(api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id: w.id } } })) : Promise.resolve([])), [open]);
  const out = useOutcome();
  return (
    <li data-webhook={w.id}>
      <div>
        <code>{w.url}</code> <span class="tag">{w.enabled ? 'enabled' : 'disabled'}</span> <span class="muted">{w.events ? w.events.join(', ') : 'every event'}</span>
      </div>
      <div class="actions">
        {w.enabled && (
          <button type="button" onClick={() => void out.run(async () => (await api.POST('/v1/webhooks/{id}/test', { params: { path: { id: w.id } } }), setOpen(true), deliveries.reload()), 'A webhook_test event is on its way')}>
            Send a test event
          </button>
        )}
        <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? 'Hide deliveries' : 'Deliveries'}
        </button>
        {open && (
          <button type="button" onClick={deliveries.reload}>
            Refresh
          </button>
        )}
        {w.enabled && (
          <ConfirmButton
            label="Disable"
            title="Disable this webhook?"
            details={() => <p>It receives nothing more, and its pending deliveries are cancelled.</p>}
            onConfirm={async () => {
              await api.DELETE('/v1/webhooks/{id}', { params: { path: { id: w.id } } });
              props.onChange();
            }}
          />
        )}
      </div>
      {out.view}
      {open && (
        <ListOf load={deliveries} what="deliveries" empty="No deliveries yet.">
          {(ds) => (
            <DataTable name="deliveries" columns={['When', 'Event', 'Attempt', 'Status', 'Outcome', 'Next retry']} caption={<>The last 50 attempts; times in {timeZone}</>}>
                  {ds.map((d) => (
                    <tr key={`${d.delivery_id}-${d.attempt}`} data-outcome={d.outcome}>
                      <td>{when(d.at)}</td>
                      <td>{d.event_type}</td>
                      <td>{d.attempt}</td>
                      <td>{d.status_code ?? d.error ?? '-'}</td>
                      <td>{d.outcome}</td>
                      <td>{when(d.next_attempt_at)}</td>
                    </tr>
                  ))}
                </DataTable>
          )}
        </ListOf>
      )}
    </li>
  );
}
