import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { timeZone } from '../format.ts';

/**
 * The console's tables: scrolled sideways inside their box at phone width, headed by column names, with a
 * caption (`times`: the viewer's time zone the times are in). `name` is the table's `data-table`.
 */
export function DataTable(props: { name: string; columns: string[]; times?: boolean; caption?: ComponentChildren; children: ComponentChildren }) {
  const caption = props.caption ?? (props.times ? `Times in ${timeZone}` : null);
  return (
    <div class="table-wrap">
      <table data-table={props.name}>
        {caption && <caption class="muted">{caption}</caption>}
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/** Cursor paging: the cursor of the page shown (undefined: the first), and the Newer/Older buttons. */
export function useCursorPages() {
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  return {
    cursor: cursors[cursors.length - 1],
    reset: () => setCursors([undefined]),
    Pager: (props: { next: string | null }) => (
      <div class="actions pager">
        <button type="button" disabled={cursors.length < 2} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button type="button" disabled={!props.next} onClick={() => props.next && setCursors([...cursors, props.next])}>
          Older
        </button>
      </div>
    ),
  };
}

/** Hands a blob to the browser as a download named `name`. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
