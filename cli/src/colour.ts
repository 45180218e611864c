/**
 * Colour, only where a person reads it: on a terminal, unless NO_COLOR is set (https://no-color.org) or the
 * terminal is `dumb`. Pipes, files and CI logs get plain text.
 */
const CODES = { red: [31, 39], yellow: [33, 39], green: [32, 39], dim: [2, 22], bold: [1, 22] } as const;
export type Colour = keyof typeof CODES;

export function colourOn(stream: { isTTY?: boolean } = process.stderr, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

/** `text` in `colour` when the stream it goes to (stderr by default) shows colour. */
export function paint(colour: Colour, text: string, stream: { isTTY?: boolean } = process.stderr): string {
  if (!colourOn(stream)) return text;
  const [on, off] = CODES[colour];
  return `\x1b[${on}m${text}\x1b[${off}m`;
}
