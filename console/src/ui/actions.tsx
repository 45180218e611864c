import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** The outcome line of an action: what happened, or why it failed (announced to screen readers). */
export function useOutcome() {
  const [msg, setMsg] = useState<{ text: string; error: boolean } | null>(null);
  const run = async (what: () => Promise<unknown>, done?: string) => {
    setMsg(null);
    try {
      await what();
      if (done) setMsg({ text: done, error: false });
      return true;
    } catch (e) {
      setMsg({ text: (e as Error).message, error: true });
      return false;
    }
  };
  const view = msg && (
    <p class={msg.error ? 'outcome error' : 'outcome ok'} role={msg.error ? 'alert' : 'status'}>
      {msg.text}
    </p>
  );
  return { run, view, say: (text: string, error = false) => setMsg({ text, error }) };
}

/**
 * A destructive action that asks first: the button opens a modal dialog saying what will happen (`details`:
 * e.g. the keys a revoke takes with it), and only its confirm button acts. Escape or Cancel leave it.
 */
export function ConfirmButton(props: {
  label: string;
  title: string;
  confirmLabel?: string;
  details?: () => Promise<ComponentChildren> | ComponentChildren;
  onConfirm: () => Promise<unknown>;
  danger?: boolean;
}) {
  const dlg = useRef<HTMLDialogElement>(null);
  const [body, setBody] = useState<ComponentChildren>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const open = async () => {
    setErr(null);
    setBody(props.details ? <p>Checking…</p> : null);
    dlg.current?.showModal();
    if (props.details) {
      try {
        setBody(await props.details());
      } catch (e) {
        setBody(<p class="error">{(e as Error).message}</p>);
      }
    }
  };
  const confirm = async () => {
    setBusy(true);
    setErr(null);
    try {
      await props.onConfirm();
      dlg.current?.close();
    } catch (e) {
      setErr((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class={props.danger === false ? '' : 'danger'} onClick={() => void open()}>
        {props.label}
      </button>
      <dialog ref={dlg} aria-labelledby={undefined} aria-label={props.title}>
        <h2>{props.title}</h2>
        {body}
        {err && (
          <p class="error" role="alert">
            {err}
          </p>
        )}
        <div class="actions">
          <button type="button" onClick={() => dlg.current?.close()}>
            Cancel
          </button>
          <button type="button" class="danger" disabled={busy} onClick={() => void confirm()}>
            {props.confirmLabel ?? props.label}
          </button>
        </div>
      </dialog>
    </>
  );
}

/** A secret the API shows once: shown here once too, with a copy button, until the person closes it. */
export function SecretOnce(props: { label: string; secret: string; note?: ComponentChildren; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const ref = useRef<HTMLElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <section class="secret" aria-label={props.label} tabIndex={-1} ref={ref}>
      <h3>{props.label}</h3>
      <p>Shown once: copy it now. The gateway keeps only its hash.</p>
      <code class="secret-value" data-secret>
        {props.secret}
      </code>
      {props.note}
      <div class="actions">
        <button
          type="button"
          onClick={() =>
            void navigator.clipboard?.writeText(props.secret).then(
              () => setCopied(true),
              () => setCopied(false),
            )
          }
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" onClick={props.onDone}>
          I saved it
        </button>
      </div>
    </section>
  );
}

/** A labelled field (label, control, hint) in the forms' grid. */
export function Field(props: { label: string; id: string; hint?: string; children: ComponentChildren }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint && (
        <small id={`${props.id}-hint`} class="muted">
          {props.hint}
        </small>
      )}
    </div>
  );
}

/** A text input in a Field: `set` gets what is typed. */
export function TextField(props: { label: string; id: string; value: string; set: (v: string) => void; hint?: string; type?: 'text' | 'url' | 'datetime-local'; inputMode?: 'decimal' | 'numeric'; required?: boolean; placeholder?: string; maxLength?: number }) {
  return (
    <Field label={props.label} id={props.id} hint={props.hint}>
      <input
        id={props.id}
        type={(props.type ?? 'text') as 'text'}
        required={props.required}
        inputMode={props.inputMode}
        placeholder={props.placeholder}
        maxLength={props.maxLength}
        value={props.value}
        aria-describedby={props.hint ? `${props.id}-hint` : undefined}
        onInput={(e) => props.set((e.target as HTMLInputElement).value)}
      />
    </Field>
  );
}
