import { extname } from 'node:path';
import { Option, type Command } from 'commander';
import { RECEIPT_HEADERS } from '@svc/shared';
import { sseFrames, type SandboxRun, type SandboxRunInput } from '@svc/shared/client';
import { context, keyClient } from '../context.ts';
import { CliError, EXIT_FAILURE, setExitCode, streamedError, usageError } from '../errors.ts';
import { collectEnv, readInput, wholeSeconds } from '../input.ts';
import { leaveOnInterrupt } from '../interrupt.ts';
import { progress } from '../progress.ts';
import { usd } from '../output.ts';

type Language = NonNullable<SandboxRunInput['language']>;
const LANGUAGES: readonly Language[] = ['sh', 'python', 'node'];
const BY_EXTENSION: Record<string, Language> = { '.sh': 'sh', '.py': 'python', '.js': 'node', '.mjs': 'node', '.cjs': 'node' };

/** The exit code of a run that ended without one: killed at its time limit (as timeout(1)), or out of memory (SIGKILL). */
export const EXIT_TIMED_OUT = 124;
export const EXIT_KILLED = 137;

interface RunOptions {
  lang?: Language;
  code?: string;
  timeout?: number;
  network?: boolean;
  env?: Record<string, string>;
  stdin?: string;
}

const seconds = wholeSeconds(3600);

/** The metadata the result event carries (a run's output went out as it came). */
type RunMeta = Omit<SandboxRun, 'stdout' | 'stderr'>;
interface Receipt {
  id: string;
  receipt: { cost_micro_usd?: number };
}

/** The program's exit code, or the conventional one for a run killed before it gave one. */
export function exitCodeOf(r: Pick<SandboxRun, 'exit_code' | 'timed_out' | 'oom_killed'>): number {
  if (r.exit_code !== null) return r.exit_code;
  if (r.timed_out) return EXIT_TIMED_OUT;
  return r.oom_killed ? EXIT_KILLED : EXIT_FAILURE;
}

function summary(meta: RunMeta, receiptId: string | undefined): string {
  const how = meta.timed_out ? `killed at its time limit (exit ${EXIT_TIMED_OUT})` : meta.oom_killed ? `killed out of memory (exit ${EXIT_KILLED})` : `exit ${meta.exit_code}`;
  return `${how}  ${(meta.duration_ms / 1000).toFixed(2)} s  receipt ${receiptId ?? meta.receipt.id}  cost ${usd(meta.cost_micro_usd)}`;
}

export function registerRun(program: Command): void {
  program
    .command('run [file]')
    .description("Run code once in a sandbox: output streams as it comes, and the program's exit code is the CLI's (needs an API key: SVC_KEY or --api-key-file)")
    .addOption(new Option('--lang <language>', 'sh, python or node (default: from the file extension, else sh)').choices(LANGUAGES))
    .option('-c, --code <code>', 'the code to run, instead of a file')
    .option('--timeout <seconds>', 'wall-clock limit; the run is killed at it (default 30)', seconds)
    .option('--network', 'give the sandbox network access (off by default)')
    .option('-e, --env <NAME=value>', 'an environment variable for the program (repeatable)', collectEnv)
    .option('--stdin <file>', "a file (or - for the CLI's stdin) fed to the program's stdin")
    .addHelpText('after', `\nFILE - reads the code from stdin. Exit codes: the program's own; ${EXIT_TIMED_OUT} when killed at the time limit, ${EXIT_KILLED} when killed out of memory;\nthe CLI's own (1, 2, 4, 5, 6: see docs/cli.md) when the run did not happen.`)
    .action(async (file: string | undefined, opts: RunOptions, cmd: Command) => {
      const ctx = context(cmd);
      if ((file === undefined) === (opts.code === undefined)) throw usageError(file === undefined ? 'nothing to run' : 'give a file or -c, not both', 'pass a FILE (- for stdin) or -c CODE');
      if (file === '-' && opts.stdin === '-') throw usageError('stdin cannot carry both the code and the program\'s input');
      const client = keyClient(ctx);
      const code = opts.code ?? (await readInput(file!, 'code file'));
      const language = opts.lang ?? (file ? BY_EXTENSION[extname(file).toLowerCase()] : undefined) ?? 'sh';
      const body: SandboxRunInput = { language, code };
      if (opts.timeout !== undefined) body.timeout_seconds = opts.timeout;
      if (opts.network) body.network = true;
      if (opts.env) body.env = opts.env;
      if (opts.stdin !== undefined) body.stdin = await readInput(opts.stdin, 'stdin file');

      const spin = progress(`running ${file && file !== '-' ? file : `${language} code`} in a sandbox`, { plain: false });
      const res = await client.runSandboxStream(body).finally(() => spin.stop());
      let meta: RunMeta | undefined;
      let receipt: Receipt | undefined;
      const output = { stdout: '', stderr: '' };
      const stay = leaveOnInterrupt('run', res.headers.get(RECEIPT_HEADERS.id));
      try {
        for await (const f of sseFrames(res)) {
          if (f.event === 'stdout' || f.event === 'stderr') {
            const data = (JSON.parse(f.data) as { data: string }).data;
            if (ctx.out.json) output[f.event] += data;
            else (f.event === 'stdout' ? process.stdout : process.stderr).write(data);
          } else if (f.event === 'result') meta = JSON.parse(f.data) as RunMeta;
          else if (f.event === 'receipt') receipt = JSON.parse(f.data) as Receipt;
          else if (f.event === 'error') {
            const e = (JSON.parse(f.data) as { error?: { type?: string; message?: string } }).error;
            throw streamedError({ type: 'internal_error', message: 'the run failed', ...e }, 'retry the run', 'the run did not finish');
          }
        }
      } finally {
        stay();
      }
      if (!meta) throw new CliError('the run ended without a result (the connection closed)', EXIT_FAILURE, 'check `svc usage` for the run, then retry');
      if (ctx.out.json) ctx.out.result({ ...meta, ...output, receipt: receipt ?? meta.receipt }, () => '');
      ctx.out.note(summary(meta, receipt?.id));
      setExitCode(exitCodeOf(meta));
    });
}
