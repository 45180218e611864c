import { Argument, type Command } from 'commander';

/** One command of the tree: its path from the root, subcommands and options (long and short flags). */
interface Node {
  path: string;
  subs: Array<{ name: string; description: string }>;
  options: Array<{ flags: string[]; description: string }>;
}

const firstSentence = (s: string) => s.split(/(?<=[.;:])\s|\s\(/)[0]!.replace(/[.;:]$/, '');

function tree(cmd: Command, prefix = ''): Node[] {
  const node: Node = {
    path: prefix,
    subs: cmd.commands.map((c) => ({ name: c.name(), description: firstSentence(c.description()) })),
    options: cmd.options.filter((o) => !o.hidden).map((o) => ({ flags: [o.long, o.short].filter((f): f is string => Boolean(f)), description: firstSentence(o.description) })),
  };
  node.options.push({ flags: ['--help', '-h'], description: 'display help' });
  return [node, ...cmd.commands.flatMap((c) => tree(c, prefix ? `${prefix} ${c.name()}` : c.name()))];
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Bash: a function keyed on the subcommand path typed so far (options and their values skipped). */
function bash(nodes: Node[], globals: string[]): string {
  const cases = (pick: (n: Node) => string) => nodes.map((n) => `    ${sq(n.path)}) echo ${sq(pick(n))} ;;`).join('\n');
  return `# bash completion for svc: source it, or put it in ~/.local/share/bash-completion/completions/svc
_svc_subcommands() {
  case "$1" in
${cases((n) => n.subs.map((s) => s.name).join(' '))}
  esac
}
_svc_options() {
  case "$1" in
${cases((n) => n.options.flatMap((o) => o.flags).join(' '))}
  esac
}
_svc() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" word i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    [[ "$word" == -* ]] && continue
    subs=" $(_svc_subcommands "$path") "
    [[ "$subs" == *" $word "* ]] && path="\${path:+$path }$word"
  done
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_svc_options "$path") ${globals.join(' ')}" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_svc_subcommands "$path")" -- "$cur"))
    [[ \${#COMPREPLY[@]} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o default -F _svc svc
`;
}

/** zsh: the same table, with each subcommand's and option's description. */
function zsh(nodes: Node[], globals: Node['options']): string {
  const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/:/g, '\\:').replace(/'/g, `'\\''`);
  const subs = nodes.map((n) => `  ${sq(n.path)} '${n.subs.map((s) => `${esc(s.name)}:${esc(s.description)}`).join('\n')}'`).join('\n');
  const opts = nodes.map((n) => `  ${sq(n.path)} '${[...n.options, ...(n.path ? globals : [])].flatMap((o) => o.flags.map((f) => `${esc(f)}:${esc(o.description)}`)).join('\n')}'`).join('\n');
  return `#compdef svc
# zsh completion for svc: put it on $fpath as _svc, or source it after compinit
typeset -gA _svc_subs _svc_opts
_svc_subs=(
${subs}
)
_svc_opts=(
${opts}
)
_svc() {
  local path="" w i
  local -a items
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    (( \${\${(f)_svc_subs[$path]}[(I)\${w}:*]} )) && path="\${path:+$path }$w"
  done
  if [[ "$PREFIX" == -* ]]; then
    items=("\${(@f)_svc_opts[$path]}")
    _describe -t options option items
  elif [[ -n "\${_svc_subs[$path]}" ]]; then
    items=("\${(@f)_svc_subs[$path]}")
    _describe -t commands command items
  else
    _files
  fi
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then _svc "$@"; else compdef _svc svc; fi
`;
}

/** fish: one `complete` line per subcommand and option, conditioned on the subcommand path typed so far. */
function fish(nodes: Node[]): string {
  const lines = ['# fish completion for svc: put it in ~/.config/fish/completions/svc.fish'];
  for (const n of nodes) {
    const parts = n.path ? n.path.split(' ') : [];
    const children = n.subs.map((s) => s.name).join(' ');
    const at = parts.length === 0 ? '__fish_use_subcommand' : `__fish_seen_subcommand_from ${parts[parts.length - 1]}${children ? `; and not __fish_seen_subcommand_from ${children}` : ''}`;
    for (const s of n.subs) lines.push(`complete -c svc -n ${sq(at)} -a ${sq(s.name)} -d ${sq(s.description)}`);
    for (const o of n.options) {
      const flags = o.flags.map((f) => (f.startsWith('--') ? `-l ${f.slice(2)}` : `-s ${f.slice(1)}`)).join(' ');
      lines.push(`complete -c svc${parts.length ? ` -n ${sq(`__fish_seen_subcommand_from ${parts[parts.length - 1]}`)}` : ''} ${flags} -d ${sq(o.description)}`);
    }
  }
  return lines.join('\n') + '\n';
}

export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('Print a shell completion script for bash, zsh or fish, generated from the command tree')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
    .addHelpText('after', '\nbash:  source <(svc completion bash)     (or write it to ~/.local/share/bash-completion/completions/svc)\nzsh:   svc completion zsh > "${fpath[1]}/_svc"\nfish:  svc completion fish > ~/.config/fish/completions/svc.fish')
    .action((shell: 'bash' | 'zsh' | 'fish') => {
      const nodes = tree(program);
      const root = nodes[0]!;
      const globals = root.options.filter((o) => !o.flags.includes('--help') && !o.flags.includes('--version'));
      // Global options are offered under every subcommand too (they are accepted there).
      const script = shell === 'bash' ? bash(nodes, globals.flatMap((o) => o.flags)) : shell === 'zsh' ? zsh(nodes, globals) : fish(nodes);
      process.stdout.write(script);
    });
}
