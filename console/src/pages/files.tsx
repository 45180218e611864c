import { useState } from 'preact/hooks';
import { data, keyApi } from '../api.ts';
import { bytes, when } from '../format.ts';
import { Field, useOutcome } from '../ui/actions.tsx';
import { ListOf, mapLoad, useLoad } from '../ui/load.tsx';
import { tabGet } from '../tab.ts';
import { saveBlob } from '../ui/table.tsx';

/** The files of a session's workspace: browse folders, download a file, upload one (at most 8 MiB). */
export function Files(props: { sessionId: string; onClose: () => void }) {
  const [path, setPath] = useState('.');
  const listing = useLoad(() => data(keyApi.GET('/v1/sandboxes/sessions/{id}/files', { params: { path: { id: props.sessionId }, query: { path } as never } })), [props.sessionId, path]);
  const entries = mapLoad(listing, (l) => l.entries);
  const out = useOutcome();
  const join = (name: string) => (path === '.' ? name : `${path.replace(/\/+$/, '')}/${name}`);
  const fileUrl = (p: string) => `/v1/sandboxes/sessions/${encodeURIComponent(props.sessionId)}/files/${p.split('/').map(encodeURIComponent).join('/')}`;
  const auth = () => ({ authorization: `Bearer ${tabGet('api_key') ?? ''}` });
  const download = (name: string) =>
    out.run(async () => {
      const res = await fetch(fileUrl(join(name)), { headers: auth() });
      if (!res.ok) throw new Error(`The gateway answered HTTP ${res.status}`);
      saveBlob(await res.blob(), name);
    });
  const upload = (file: File) =>
    out.run(async () => {
      const res = await fetch(fileUrl(join(file.name)), { method: 'PUT', headers: { ...auth(), 'content-type': 'application/octet-stream' }, body: file });
      if (!res.ok) throw new Error(`The gateway answered HTTP ${res.status}`);
      listing.reload();
    }, `Uploaded ${file.name}`);
  return (
    <section class="card" aria-label={`Files of ${props.sessionId}`}>
      <h2>
        Files of <code>{props.sessionId}</code>: <code>{path}</code>
      </h2>
      <div class="actions">
        {path !== '.' && (
          <button type="button" onClick={() => setPath(path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.')}>
            Up
          </button>
        )}
        <Field label="Upload a file" id="upload">
          <input id="upload" type="file" onChange={(e) => (e.target as HTMLInputElement).files?.[0] && void upload((e.target as HTMLInputElement).files![0]!)} />
        </Field>
        <button type="button" onClick={props.onClose}>
          Close files
        </button>
      </div>
      {out.view}
      <ListOf load={entries} what="the folder" empty="This folder is empty.">
        {(es) => (
          <ul class="rows" data-list="files">
            {es.map((e) => (
              <li key={e.name}>
                {e.type === 'directory' || e.type === 'dir' ? (
                  <button type="button" class="link" onClick={() => setPath(join(e.name))}>
                    {e.name}/
                  </button>
                ) : (
                  <button type="button" class="link" onClick={() => void download(e.name)}>
                    {e.name}
                  </button>
                )}{' '}
                <span class="muted">
                  {bytes(e.size)}, {when(e.mtime)}
                </span>
              </li>
            ))}
          </ul>
        )}
      </ListOf>
    </section>
  );
}
