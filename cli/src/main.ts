import { createRequire } from 'node:module';
import { Command, Option } from 'commander';
import { registerBilling } from './commands/billing.ts';
import { registerChat } from './commands/chat.ts';
import { registerKeys } from './commands/keys.ts';
import { registerLogin } from './commands/login.ts';
import { registerNodes } from './commands/nodes.ts';
import { registerReceipts } from './commands/receipts.ts';
import { registerRun } from './commands/run.ts';
import { registerStatus } from './commands/status.ts';
import { registerUsage } from './commands/usage.ts';
import { registerWebhooks } from './commands/webhooks.ts';
import { registerSandbox } from './commands/sandbox.ts';
import { registerFiles } from './commands/files.ts';
import { registerBatches } from './commands/batches.ts';
import { registerVideos } from './commands/videos.ts';
import { registerWallet } from './commands/wallet.ts';
import { registerApi } from './commands/api.ts';
import { registerCompletion } from './commands/completion.ts';
import { DEFAULT_URL, resolvedUrl } from './context.ts';
import { commandExitCode, reportError } from './errors.ts';
import { configureHelp, wrapHelpOutput } from './help.ts';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

function buildProgram(): Command {
  const program = new Command('svc')
    .description('Command-line client for the metered compute gateway')
    .version(version)
    .addOption(new Option('--url <origin>', `gateway origin (default: the signed-in gateway, else ${DEFAULT_URL})`).env('SVC_URL'))
    .option('--json', 'machine-readable JSON output')
    .option('--api-key-file <path>', 'file holding the API key for key routes (chat, run, ...); default: env SVC_KEY')
    .exitOverride();
  configureHelp(program); // before the subcommands: they copy it
  registerLogin(program);
  registerWallet(program);
  registerStatus(program);
  registerKeys(program);
  registerNodes(program);
  registerChat(program);
  registerRun(program);
  registerBilling(program);
  registerUsage(program);
  registerReceipts(program);
  registerWebhooks(program);
  registerSandbox(program);
  registerFiles(program);
  registerBatches(program);
  registerVideos(program);
  registerApi(program);
  registerCompletion(program);
  oneLineErrors(program);
  return program;
}

/** Commander's own errors (unknown option, bad value, missing argument) as one line that names the help to read. */
function oneLineErrors(cmd: Command): void {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  const help = `run \`${names.join(' ')} --help\` for usage`;
  cmd.configureOutput({ outputError: (str, write) => write(`${str.trimEnd().replace(/\s*\n\s*/g, ' ')}; ${help}\n`) });
  wrapHelpOutput(cmd);
  for (const sub of cmd.commands) oneLineErrors(sub);
}

/** Runs the CLI on argv (process.argv shape) and returns the exit code. */
async function run(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return commandExitCode();
  } catch (err) {
    return reportError(err, resolvedUrl());
  }
}

process.exitCode = await run(process.argv);
