import type { Command, Help } from 'commander';

/** The width help is written to: the terminal's columns, else 80 (commander's own rule). */
export function helpWidth(stream: { isTTY?: boolean; columns?: number } = process.stdout): number {
  return stream.isTTY && stream.columns ? stream.columns : 80;
}

/** Wraps one line at spaces to `width`, continuation lines indented as the line itself is (plus `hang`). */
export function wrapLine(line: string, width: number, hang = 0): string[] {
  if (line.length <= width) return [line];
  const indent = ' '.repeat(Math.min((/^ */.exec(line)?.[0].length ?? 0) + hang, Math.floor(width / 2)));
  const out: string[] = [];
  let rest = line;
  let first = true;
  while (rest.length > width) {
    let cut = rest.lastIndexOf(' ', width);
    // No space to break at past the indent: break the word where it meets the edge.
    if (cut <= (first ? (/^ */.exec(rest)?.[0].length ?? 0) : indent.length)) cut = width;
    out.push(rest.slice(0, cut).trimEnd());
    rest = indent + rest.slice(cut).trimStart();
    first = false;
  }
  out.push(rest);
  return out;
}

/** Text as written to a terminal of `width` columns: every line that is longer is wrapped. */
export function wrapText(text: string, width: number): string {
  return text
    .split('\n')
    .flatMap((l) => wrapLine(l, width, /^\s+\S/.test(l) ? 2 : 0))
    .join('\n');
}

/**
 * Help as gh prints it: the options every command inherits (--url, --json, --api-key-file) shown under each
 * subcommand, and everything wrapped to the terminal's width. Where the names column leaves too little room
 * for a description beside it, the description goes on the next line (commander would leave it unwrapped).
 */
export function configureHelp(program: Command): void {
  program.configureHelp({
    showGlobalOptions: true,
    formatItem(this: Help, term: string, termWidth: number, description: string, helper: Help): string {
      const width = this.helpWidth ?? 80;
      if (!description || width - termWidth - 4 >= 40) return Object.getPrototypeOf(this).formatItem.call(this, term, termWidth, description, helper);
      return `  ${term}\n${helper.boxWrap(description, width - 6).replace(/^/gm, '      ')}`;
    },
  });
}

/** Every help text (commander's and each command's own `addHelpText`) goes out wrapped to the terminal. */
export function wrapHelpOutput(cmd: Command): void {
  cmd.configureOutput({ writeOut: (str) => process.stdout.write(wrapText(str, helpWidth())) });
}
