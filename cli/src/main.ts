import { createRequire } from 'node:module';
import { Command, Option } from 'commander';
import { registerKeys } from './commands/keys.ts';
import { registerLogin } from './commands/login.ts';
import { registerNodes } from './commands/nodes.ts';
import { registerStatus } from './commands/status.ts';
import { DEFAULT_URL, resolvedUrl } from './context.ts';
import { reportError } from './errors.ts';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

function buildProgram(): Command {
  const program = new Command('svc')
    .description('Command-line client for the metered compute gateway')
    .version(version)
    .addOption(new Option('--url <origin>', `gateway origin (default: the signed-in gateway, else ${DEFAULT_URL})`).env('SVC_URL'))
    .option('--json', 'machine-readable JSON output')
    .showHelpAfterError('(run `svc --help` for usage)')
    .exitOverride();
  registerLogin(program);
  registerStatus(program);
  registerKeys(program);
  registerNodes(program);
  return program;
}

/** Runs the CLI on argv (process.argv shape) and returns the exit code. */
async function run(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return 0;
  } catch (err) {
    return reportError(err, resolvedUrl());
  }
}

process.exitCode = await run(process.argv);
