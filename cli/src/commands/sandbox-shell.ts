import type { IncomingMessage } from 'node:http';
import type { Command } from 'commander';
import WebSocket from 'ws';
import { ApiError } from '@svc/shared/client';
import { apiKey, context } from '../context.ts';
import { CliError, EXIT_FAILURE, EXIT_USAGE, noteCredential, setExitCode } from '../errors.ts';
import { usd } from '../output.ts';
import { sessionError } from '../sandbox-errors.ts';

/** The exit code of a terminal a limit ended (its time limit, or idle), as timeout(1)'s. */
const EXIT_LIMIT = 124;
/** Keystrokes waiting to go to the gateway: above this stdin is paused until they went. */
const SEND_HIGH = 256 * 1024;
/** The most bytes one frame of keystrokes carries (the gateway takes frames up to 64 KiB). */
const FRAME_BYTES = 16 * 1024;

interface ExitFrame {
  type: 'exit';
  code: number | null;
  reason: 'exited' | 'closed' | 'idle' | 'timed_out';
  duration_ms: number;
  cost_micro_usd: number;
  receipt: { id: string };
}
interface ReadyFrame {
  type: 'ready';
  idle_seconds?: number;
  max_seconds?: number;
}

/** The gateway's answer instead of the upgrade (a refusal), as the ApiError the other commands throw. */
function refusal(res: IncomingMessage): Promise<ApiError> {
  return new Promise((resolve) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (body += d));
    res.on('end', () => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        parsed = undefined;
      }
      const headers = new Headers();
      for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
      resolve(new ApiError(res.statusCode ?? 502, parsed, headers));
    });
  });
}

/**
 * `svc sandbox shell`: the session's terminal (GET /v1/sandboxes/sessions/{id}/terminal over WebSocket) on this
 * terminal. stdin goes raw, so ^C, ^Z and the rest reach the program in the sandbox, not the CLI; a window
 * resize (SIGWINCH) is sent as a resize frame; the screen is written to stdout as it comes, and a slow stdout
 * holds the gateway back. The terminal is put back as it was however the shell ends. The CLI exits with the
 * shell's exit code (124 when a limit ended it: the time limit, or idle).
 */
export function registerShell(sandbox: Command): void {
  sandbox
    .command('shell <session>')
    .description("An interactive terminal into the session (a shell under a TTY in its container); exits with the shell's exit code")
    .addHelpText('after', '\nCtrl-C and every other key go to the sandbox. Leave with `exit` (or Ctrl-D at the prompt).\nMetered per second while open; the receipt id and cost are printed when it ends.')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const stdin = process.stdin;
      const stdout = process.stdout;
      if (!stdin.isTTY || !stdout.isTTY) {
        throw new CliError('svc sandbox shell needs a terminal (stdin and stdout)', EXIT_USAGE, 'run commands from scripts with `svc sandbox exec <session> -- <command>`');
      }
      const token = apiKey(ctx);
      noteCredential('key');
      const url = new URL(`/v1/sandboxes/sessions/${encodeURIComponent(id)}/terminal`, ctx.url);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      url.searchParams.set('cols', String(stdout.columns || 80));
      url.searchParams.set('rows', String(stdout.rows || 24));
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });

      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('unexpected-response', (_req, res) => void refusal(res).then((e) => reject(sessionError(id, e))));
        ws.once('error', (e) => reject(Object.assign(new TypeError('fetch failed'), { cause: e })));
      });
      ws.on('error', () => undefined); // a dropped connection is said by its close

      let exit: ExitFrame | undefined;
      let failure: { type?: string; message?: string } | undefined;
      let ready: ReadyFrame | undefined;
      const restore = () => {
        if (stdin.isRaw) stdin.setRawMode(false);
      };
      process.on('exit', restore);
      stdin.setRawMode(true);

      const send = (data: Buffer) => {
        for (let i = 0; i < data.length; i += FRAME_BYTES) ws.send(data.subarray(i, i + FRAME_BYTES), { binary: true });
        if (ws.bufferedAmount > SEND_HIGH) {
          stdin.pause();
          const wait = () => (ws.bufferedAmount > SEND_HIGH / 2 && ws.readyState === ws.OPEN ? setTimeout(wait, 10) : stdin.resume());
          setTimeout(wait, 10);
        }
      };
      const onKeys = (d: Buffer) => {
        if (ws.readyState === ws.OPEN) send(d);
      };
      const onResize = () => {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: stdout.columns, rows: stdout.rows }));
      };
      // A SIGINT sent to the CLI itself (kill -INT) goes to the sandbox too, as ^C does; SIGTERM and SIGHUP end the terminal.
      const onInt = () => {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'signal', name: 'INT' }));
      };
      const onEnd = () => ws.close(1000, 'the caller left');
      stdin.on('data', onKeys);
      stdout.on('resize', onResize);
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onEnd);
      process.on('SIGHUP', onEnd);
      stdin.resume();

      ws.on('message', (data, binary) => {
        if (binary) {
          const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
          if (!stdout.write(buf)) {
            ws.pause();
            stdout.once('drain', () => ws.resume());
          }
          return;
        }
        let frame: { type?: string } & Record<string, unknown>;
        try {
          frame = JSON.parse(String(data)) as typeof frame;
        } catch {
          return;
        }
        if (frame.type === 'exit') exit = frame as unknown as ExitFrame;
        else if (frame.type === 'error') failure = (frame.error ?? {}) as typeof failure;
        else if (frame.type === 'ready') ready = frame as ReadyFrame;
      });
      const closed = await new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));

      stdin.off('data', onKeys);
      stdout.off('resize', onResize);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onEnd);
      process.off('SIGHUP', onEnd);
      restore();
      process.off('exit', restore);
      stdin.pause();

      if (exit) {
        const how = exit.reason === 'exited' ? `exit ${exit.code}` : exit.reason === 'idle' ? `closed after ${ready?.idle_seconds ?? '?'} s without input or output` : exit.reason === 'timed_out' ? `killed at the time limit (${ready?.max_seconds ?? '?'} s)` : 'closed';
        ctx.out.note(`${how}  ${(exit.duration_ms / 1000).toFixed(2)} s  receipt ${exit.receipt.id}  cost ${usd(exit.cost_micro_usd)}`);
        if (ctx.out.json) ctx.out.result(exit, () => '');
        setExitCode(exit.reason === 'exited' ? (exit.code ?? EXIT_FAILURE) : exit.reason === 'closed' ? 0 : EXIT_LIMIT);
        return;
      }
      if (failure) throw new CliError(`the terminal failed: ${failure.type ?? 'error'}: ${failure.message ?? 'no reason given'}`, EXIT_FAILURE, `check the session with \`svc sandbox status ${id}\`, then run \`svc sandbox shell ${id}\` again`);
      if (closed.code === 1000 && closed.reason === 'the caller left') return;
      throw new CliError(`the connection to the gateway closed (${closed.code}${closed.reason ? `: ${closed.reason}` : ''}); the terminal's processes were ended`, EXIT_FAILURE, `run \`svc sandbox shell ${id}\` again`);
    });
}
