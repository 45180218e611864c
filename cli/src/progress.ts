/**
 * Progress on stderr: a spinner when stderr is a terminal, plain lines otherwise (logs, pipes, CI). stdout
 * never carries progress.
 */
export interface Progress {
  /** New text for the spinner; a plain line when not a terminal and `plain` is set. */
  update(text: string): void;
  /** Removes the spinner (nothing to remove in plain mode). */
  stop(): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface ProgressOptions {
  stream?: NodeJS.WriteStream;
  /** Write the text as a plain line when stderr is not a terminal (default true). */
  plain?: boolean;
}

export function progress(text: string, opts: ProgressOptions = {}): Progress {
  const stream = opts.stream ?? process.stderr;
  const plain = opts.plain ?? true;
  if (!stream.isTTY) {
    let last = '';
    const say = (t: string) => {
      if (plain && t !== last) stream.write(`${t}\n`);
      last = t;
    };
    say(text);
    return { update: say, stop: () => undefined };
  }
  let current = text;
  let i = 0;
  let stopped = false;
  const draw = () => stream.write(`\r\x1b[2K${FRAMES[i++ % FRAMES.length]} ${current}`);
  draw();
  const timer = setInterval(draw, 80);
  timer.unref();
  return {
    update(t) {
      current = t;
      if (!stopped) draw();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      stream.write('\r\x1b[2K');
    },
  };
}
