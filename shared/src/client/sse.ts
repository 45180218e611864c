import { SseParser, type SseFrame } from '../inference-protocol.ts';

/** The frames of a server-sent-events answer, as they arrive; a final frame without its blank line included. */
export async function* sseFrames(res: Response): AsyncGenerator<SseFrame> {
  if (!res.body) return;
  const parser = new SseParser();
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
    yield* parser.push(decoder.decode());
    yield* parser.end();
  } finally {
    reader.releaseLock();
  }
}
