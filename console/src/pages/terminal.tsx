import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { usd } from '../format.ts';
import { Link } from '../router.tsx';

/**
 * A terminal into a sandbox session in the browser (xterm.js) over the gateway's WebSocket terminal: keystrokes
 * go out as binary frames, the window's size as resize frames, Ctrl-C as the terminal's own ^C (and a button
 * that sends the INT signal), the screen comes back as binary frames. A browser cannot set headers on a
 * WebSocket, so the tab's API key goes as the `svc.key.` subprotocol beside `svc.terminal`.
 */

/** The page's CSP nonce (the meta tag Vite writes), for the style elements xterm.js inserts. */
function allowStyles(): void {
  const nonce = (document.querySelector('meta[property=csp-nonce]') as HTMLMetaElement | null)?.nonce;
  const doc = document as Document & { svcNonced?: boolean };
  if (!nonce || doc.svcNonced) return;
  doc.svcNonced = true;
  const create = document.createElement.bind(document);
  document.createElement = ((tag: string, options?: ElementCreationOptions) => {
    const el = create(tag, options);
    if (tag.toLowerCase() === 'style') el.nonce = nonce;
    return el;
  }) as typeof document.createElement;
}

interface Exit {
  type: 'exit';
  code: number | null;
  reason: string;
  duration_ms: number;
  cost_micro_usd: number;
  receipt?: { id?: string } | null;
}

export function TerminalPanel(props: { sessionId: string; apiKey: string; onClose: () => void }) {
  const box = useRef<HTMLDivElement>(null);
  const sock = useRef<WebSocket | null>(null);
  const [state, setState] = useState('Connecting…');
  const [exit, setExit] = useState<Exit | null>(null);
  useEffect(() => {
    allowStyles();
    const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, screenReaderMode: true });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    fit.fit();
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    const url = `${proto}://${location.host}/v1/sandboxes/sessions/${encodeURIComponent(props.sessionId)}/terminal?cols=${term.cols}&rows=${term.rows}`;
    const ws = new WebSocket(url, ['svc.terminal', `svc.key.${props.apiKey}`]);
    sock.current = ws;
    ws.binaryType = 'arraybuffer';
    const enc = new TextEncoder();
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') return term.write(new Uint8Array(m.data as ArrayBuffer));
      const f = JSON.parse(m.data) as { type: string; error?: { message: string } };
      if (f.type === 'ready') {
        setState('Connected');
        term.focus();
      } else if (f.type === 'exit') setExit(f as unknown as Exit);
      else if (f.type === 'error') setState(`The terminal failed: ${f.error?.message ?? 'unknown error'}`);
    };
    ws.onclose = (e) => setState(e.code === 1000 ? 'Closed' : `Closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`);
    ws.onerror = () => setState('The terminal could not connect (is the session running, and the key allowed sandboxes?)');
    const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
    const binary = term.onBinary((d) => ws.readyState === WebSocket.OPEN && ws.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    const resize = term.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'resize', cols, rows })));
    const ro = new ResizeObserver(() => fit.fit());
    ro.observe(box.current!);
    return () => {
      ro.disconnect();
      input.dispose();
      binary.dispose();
      resize.dispose();
      ws.close(1000);
      term.dispose();
    };
  }, [props.sessionId, props.apiKey]);
  const signal = (name: string) => sock.current?.readyState === WebSocket.OPEN && sock.current.send(JSON.stringify({ type: 'signal', name }));
  return (
    <section class="terminal" aria-label={`Terminal of ${props.sessionId}`}>
      <div class="actions">
        <span role="status" data-terminal-state>
          {state}
        </span>
        <button type="button" onClick={() => signal('INT')}>
          Send Ctrl-C
        </button>
        <button type="button" onClick={props.onClose}>
          Close terminal
        </button>
      </div>
      <div ref={box} class="xterm-box" data-terminal={props.sessionId} />
      {exit && (
        <p role="status" data-terminal-exit={exit.reason}>
          Ended ({exit.reason}
          {exit.code !== null ? `, exit code ${exit.code}` : ''}) after {Math.round(exit.duration_ms / 1000)} s: {usd(exit.cost_micro_usd)}.{' '}
          {exit.receipt?.id && <Link href={`/receipts/${encodeURIComponent(exit.receipt.id)}`}>Its receipt</Link>}
        </p>
      )}
    </section>
  );
}
