import { Command, Option } from 'commander';
import { Agent, AGENT_VERSION } from './agent.ts';
import { configDir, configPath, readConfig, readKeyFile, writeConfig } from './config.ts';
import { doctorCommand } from './doctor/command.ts';

/** `svc-node`: enroll once, run, status. */
const program = new Command('svc-node')
  .description('svc node agent')
  .version(AGENT_VERSION)
  .option('--config-dir <dir>', 'where agent.json lives (default: $SVC_NODE_CONFIG_DIR, else ~/.config/svc-node)');

const dir = () => (program.opts() as { configDir?: string }).configDir ?? configDir();

program
  .command('enroll')
  .description('Store the control-plane URL and this node key (from `svc nodes enroll` or an admin); --session enrolls now')
  .requiredOption('--url <origin>', 'control-plane origin, e.g. https://gateway.example')
  .option('--key <key>', 'an nk-svc_ node key you were given (or env SVC_NODE_KEY; other users can read arguments with ps)')
  .option('--key-file <path>', 'a file holding the nk-svc_ node key (keep it 0600)')
  .option('--session <token>', 'enroll a new node with your sess_ session token (or env SVC_SESSION)')
  .option('--kinds <list>', 'with --session: sandbox,inference', 'sandbox')
  .option('--name <name>', 'with --session: a name for the node')
  .option('--data-dir <dir>', 'where the agent keeps snapshots and workspaces', '/var/lib/svc-node')
  .option('--endpoint <url>', 'this node\'s reachable endpoint, if any')
  .action(async (o: { url: string; key?: string; keyFile?: string; session?: string; kinds: string; name?: string; dataDir: string; endpoint?: string }) => {
    let key = o.key ?? (o.keyFile !== undefined ? readKeyFile(o.keyFile) : undefined) ?? process.env.SVC_NODE_KEY;
    let nodeId: string | null = null;
    const session = o.session ?? process.env.SVC_SESSION;
    if (!key && session) {
      const res = await fetch(new URL('/v1/nodes/enroll', o.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${session}`, 'content-type': 'application/json' },
        body: JSON.stringify({ kinds: o.kinds.split(',').map((k) => k.trim()), ...(o.name ? { name: o.name } : {}) }),
      });
      const body = (await res.json()) as { node?: { id: string }; node_key?: string; error?: { message: string } };
      if (!res.ok || !body.node_key) throw new Error(`enrollment refused: ${body.error?.message ?? res.status}`);
      key = body.node_key;
      nodeId = body.node!.id;
    }
    if (!key?.startsWith('nk-svc_')) throw new Error('give --key-file <file with the nk-svc_ key> (or SVC_NODE_KEY), or --session to enroll now');
    writeConfig(dir(), { url: o.url, node_key: key, node_id: nodeId, data_dir: o.dataDir, endpoint: o.endpoint ?? null });
    console.log(`enrolled${nodeId ? ` as ${nodeId}` : ''}; configuration written to ${configPath(dir())} (0600)`);
    if (nodeId) console.log('an admin must approve the node before it takes work');
  });

program
  .command('run')
  .description('Heartbeat every 60 s and take jobs over the channel until stopped')
  // Claims another protocol version on connect: only to see (and test) how a control plane refuses a mismatch.
  .addOption(new Option('--protocol-version <n>').hideHelp().argParser((v) => Number.parseInt(v, 10)))
  .action(async (o: { protocolVersion?: number }) => {
    const cfg = readConfig(dir());
    const agent = new Agent(cfg, {
      onNodeId: (nodeId) => writeConfig(dir(), { ...cfg, node_id: nodeId }),
      ...(o.protocolVersion !== undefined ? { protocolVersion: o.protocolVersion } : {}),
    });
    // Remove this agent's containers and volumes before exiting (systemd stops and restarts send SIGTERM).
    // One stop, whatever signals follow the first: Ctrl-C reaches every process of the terminal's group, and a
    // parent that started this agent (`npm start`) sends its own SIGTERM on top; a repeated signal must not
    // cut the cleanup short. SIGKILL remains for an agent that has to go at once.
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return agent.log(`${signal} received; already stopping (removing this agent's sandboxes)`);
      stopping = true;
      agent.log(`${signal} received; stopping`);
      void Promise.resolve(agent.stop()).finally(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    const fatal = await agent.run();
    // Exit 3 = refused for good (wrong or revoked node key, incompatible protocol version): retrying cannot
    // help, so the systemd unit does not restart on it (RestartPreventExitStatus=3).
    console.error(`svc-node: ${fatal}`);
    console.error('svc-node: not retrying (exit status 3); fix the cause above, then start the agent again');
    process.exit(3);
  });

program
  .command('status')
  .description('Show the configuration (without the key) and what the control plane reports for this node')
  .action(async () => {
    const cfg = readConfig(dir());
    console.log(`control plane: ${cfg.url}\nnode key: ${cfg.node_key.slice(0, 14)}… (in ${configPath(dir())})\ndata dir: ${cfg.data_dir}`);
    const res = await fetch(new URL('/v1/nodes', cfg.url)).catch(() => null);
    if (!res?.ok) {
      console.log('control plane: unreachable');
      return;
    }
    const nodes = (await res.json()) as Array<{ id: string; status?: string; reliability?: number | null }>;
    const me = cfg.node_id ? nodes.find((n) => n.id === cfg.node_id) : undefined;
    console.log(me ? `node ${me.id}: ${me.status} (reliability ${me.reliability ?? 'n/a'})` : 'control plane reachable');
  });

program
  .command('doctor')
  .description('Check Docker and the sandbox images, the control plane and its clock, the node key, the data dir and the local inference server; exit 0 only when all pass')
  .option('--json', 'one JSON document instead of lines')
  .action(async (o: { json?: boolean }) => {
    process.exitCode = await doctorCommand(dir(), { json: o.json === true });
  });

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(`svc-node: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
