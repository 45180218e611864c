import { readFileSync, statSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import type { EnrolledNode, NodeEnrollInput, NodeKindName, NodeRegistryEntry, OwnerNode, PublicNode } from '@svc/shared/client';
import { context, sessionClient, type Context } from '../context.ts';
import { noteCredential, usageError, fileProblem } from '../errors.ts';
import { fields, table } from '../output.ts';

const KINDS: readonly NodeKindName[] = ['sandbox', 'inference'];
const ADMIN_HINT = 'pass --admin-token-file <path> (a 0600 file holding the gateway admin token) or set SVC_ADMIN_TOKEN';

function kindsList(value: string): NodeKindName[] {
  const out: NodeKindName[] = [];
  for (const k of value.split(',').map((x) => x.trim()).filter(Boolean)) {
    if (!(KINDS as readonly string[]).includes(k)) throw new InvalidArgumentError(`unknown kind "${k}"; one or both of: ${KINDS.join(', ')}`);
    if (!out.includes(k as NodeKindName)) out.push(k as NodeKindName);
  }
  if (out.length === 0) throw new InvalidArgumentError(`give one or both of: ${KINDS.join(', ')}`);
  return out;
}

function collectModels(value: string, previous: string[]): string[] {
  const out = [...previous];
  for (const m of value.split(',').map((x) => x.trim()).filter(Boolean)) if (!out.includes(m)) out.push(m);
  return out;
}

function collectMapping(value: string, previous: Record<string, string>): Record<string, string> {
  const eq = value.indexOf('=');
  const pub = value.slice(0, eq).trim();
  const local = value.slice(eq + 1).trim();
  if (eq < 0 || !pub || !local) throw new InvalidArgumentError(`expected <public model>=<local model>, got "${value}"`);
  return { ...previous, [pub]: local };
}

function speedFactor(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('--speed-factor must be a positive number (1.0 = the reference node)');
  return n;
}

const isNode = (e: NodeRegistryEntry): e is PublicNode => e.type === 'node';
const pct = (r: number | null) => (r === null ? '-' : `${(r * 100).toFixed(1)}%`);
const ms = (v: number | null) => (v === null ? '-' : `${v} ms`);
const statusText = (s: string) => s.replaceAll('_', ' ');

export function nodesTable(entries: readonly NodeRegistryEntry[]): string {
  const lines: string[] = [];
  for (const e of entries) {
    if (e.type === 'gateway') lines.push(`gateway: ${e.name} ${e.version} (${e.status})`);
    else if (e.type === 'tee_backend') lines.push(`TEE backend: ${e.configured ? (e.attested ? 'attested' : 'not attested') : 'not configured'}`);
  }
  const nodes = entries.filter(isNode);
  if (nodes.length === 0) return [...lines, '', 'No enrolled nodes. Enroll one with `svc nodes enroll --kinds sandbox`.'].join('\n');
  const rows = nodes.map((n) => [
    n.id,
    n.name ?? '-',
    n.kinds.join(','),
    statusText(n.status),
    n.models.length ? n.models.join(',') : '-',
    String(n.speed_factor),
    String(n.clamp_count),
    pct(n.reliability),
    ms(n.latency_ms),
  ]);
  return [...lines, '', table(['ID', 'NAME', 'KINDS', 'STATUS', 'MODELS', 'SPEED', 'CLAMPS', 'RELIABILITY', 'LATENCY'], rows)].join('\n');
}

function nodeFields(n: OwnerNode): string {
  return fields([
    ['id', n.id],
    ['name', n.name ?? '-'],
    ['kinds', n.kinds.join(',')],
    ...(n.models.length ? ([['models', n.models.join(',')]] as const) : []),
    ...(Object.keys(n.model_map).length ? ([['model map', Object.entries(n.model_map).map(([p, l]) => `${p}=${l}`).join(', ')]] as const) : []),
    ['speed factor', String(n.declared_speed_factor)],
    ['status', statusText(n.status)],
    ['approved', n.approved ? 'yes' : 'no (an admin approves it before it takes work)'],
  ]);
}

function enrolledText(e: EnrolledNode, url: string): string {
  return [
    `Enrolled node ${e.node.id}.`,
    nodeFields(e.node),
    '',
    'Node key (shown once and cannot be retrieved again; store it now):',
    `  ${e.node_key}`,
    '',
    'Next, on the node host, hand the key to the agent without putting it on a command line',
    '(arguments show in `ps` to every user, and typed lines stay in your shell history):',
    '  read -rs SVC_NODE_KEY && export SVC_NODE_KEY   # paste the key, press Enter',
    `  svc-node enroll --url ${url}   # reads SVC_NODE_KEY`,
    'or, to install the agent as a systemd service from a checkout of this repository:',
    '  install -m 600 /dev/stdin node.key             # paste the key, press Enter, then Ctrl-D',
    `  sudo installers/node-agent/install.sh --url ${url} --key-file node.key`,
    `(\`svc-node enroll --url ${url} --key <key>\` works too, but leaves the key in ps and your history.)`,
    '',
    `Then an admin approves it: svc nodes approve ${e.node.id}`,
  ].join('\n');
}

/** The admin token: --admin-token-file wins over SVC_ADMIN_TOKEN. Never an argument; never echoed. */
function adminToken(ctx: Context, file: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  noteCredential('admin');
  if (file !== undefined) {
    let raw: string;
    let mode: number;
    try {
      mode = statSync(file).mode;
      raw = readFileSync(file, 'utf8');
    } catch (err) {
      throw usageError(`cannot read admin token file ${file}: ${fileProblem(err)}`, ADMIN_HINT);
    }
    if ((mode & 0o077) !== 0) ctx.out.note(`warning: admin token file ${file} is readable by other users; chmod 600 it`);
    const token = raw.trim();
    if (!token || /\s/.test(token)) throw usageError(`admin token file ${file} does not hold a token (one line, no spaces)`, ADMIN_HINT);
    return token;
  }
  const token = env.SVC_ADMIN_TOKEN?.trim();
  if (token) return token;
  throw usageError('no admin token given', ADMIN_HINT);
}

const GATES = {
  drain: {
    gate: 'draining',
    on: 'finishes the work it is running and takes no new work',
    off: 'takes new work again',
  },
  disable: {
    gate: 'disabled',
    on: 'takes no work',
    off: 'is enabled again and takes work',
  },
} as const;

interface EnrollOptions {
  kinds: NodeKindName[];
  name?: string;
  model: string[];
  modelMap: Record<string, string>;
  speedFactor?: number;
}

export function registerNodes(program: Command): void {
  const nodes = program.command('nodes').description('Fleet nodes: list the registry, enroll a node, approve (admin), drain and disable (owner or admin)');

  nodes
    .command('list')
    .description('The public node registry: kinds, status, models, speed, clamps, reliability, latency')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const list = await ctx.client.nodes();
      ctx.out.result(list, () => nodesTable(list));
    });

  nodes
    .command('enroll')
    .description('Enroll a node for the signed-in account; its nk-svc_ node key is printed once')
    .requiredOption('--kinds <list>', `what the node runs, comma-separated: ${KINDS.join(', ')}`, kindsList)
    .option('--name <name>', 'a label for the node')
    .option('--model <id>', 'a public model id an inference node serves (repeatable or comma-separated)', collectModels, [])
    .option('--model-map <pub=local>', "map a public model id to the node's local model name (repeatable)", collectMapping, {})
    .option('--speed-factor <f>', 'declared speed relative to the reference node (1.0)', speedFactor)
    .action(async (opts: EnrollOptions, cmd: Command) => {
      const ctx = context(cmd);
      const { client } = sessionClient(ctx);
      const input: NodeEnrollInput = { kinds: opts.kinds };
      if (opts.name !== undefined) input.name = opts.name;
      if (opts.model.length > 0) input.models = opts.model;
      if (Object.keys(opts.modelMap).length > 0) input.model_map = opts.modelMap;
      if (opts.speedFactor !== undefined) input.speed_factor = opts.speedFactor;
      const enrolled = await client.enrollNode(input);
      ctx.out.result(enrolled, () => enrolledText(enrolled, ctx.url));
    });

  nodes
    .command('approve <node_id>')
    .description('Admin: approve a node for scheduling (or withdraw the approval with --revoke)')
    .option('--revoke', 'withdraw the approval: the node takes no new work')
    .option('--admin-token-file <path>', 'file holding the gateway admin token (default: env SVC_ADMIN_TOKEN)')
    .action(async (id: string, opts: { revoke?: boolean; adminTokenFile?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const token = adminToken(ctx, opts.adminTokenFile);
      const node = await ctx.client.withCredential({ kind: 'bearer', token }).approveNode(id, !opts.revoke);
      ctx.out.result(node, () =>
        opts.revoke ? `Withdrew the approval of ${node.id}: it takes no new work (status ${statusText(node.status)}).` : `Approved ${node.id} for scheduling (status ${statusText(node.status)}).`,
      );
    });

  for (const [name, g] of Object.entries(GATES)) {
    nodes
      .command(`${name} <node_id>`)
      .description(`Owner, or an admin for any node: the node ${g.on} (--off lifts it)`)
      .option('--off', `lift the ${g.gate} gate`)
      .option('--admin-token-file <path>', 'as an admin (any node, house nodes included), with the gateway admin token in this file')
      .option('--admin', 'as an admin, with the admin token in env SVC_ADMIN_TOKEN')
      .action(async (id: string, opts: { off?: boolean; admin?: boolean; adminTokenFile?: string }, cmd: Command) => {
        const ctx = context(cmd);
        const asAdmin = opts.admin === true || opts.adminTokenFile !== undefined;
        const node = asAdmin
          ? await ctx.client.withCredential({ kind: 'bearer', token: adminToken(ctx, opts.adminTokenFile) }).adminGateNode(id, g.gate, !opts.off)
          : await sessionClient(ctx).client.gateNode(id, g.gate, !opts.off);
        ctx.out.result(node, () => `${opts.off ? `Lifted ${g.gate} on ${node.id}: it ${g.off}` : `${node.id} is ${g.gate}: it ${g.on}`} (status ${statusText(node.status)}).`);
      });
  }
}
