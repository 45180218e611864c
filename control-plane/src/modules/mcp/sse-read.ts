import { StringDecoder } from 'node:string_decoder';

/** One server-sent event as read from an upstream stream. */
export interface SseEvent {
  event: string | null;
  data: string;
  id: string | null;
}

/**
 * Reads server-sent events (the WHATWG event-stream format: LF, CRLF or CR line ends, `data` lines joined by
 * LF, comments skipped) from a byte stream. An event whose data grows past `maxEvent` characters, or a line
 * that long without an end, throws: the stream is not one this gateway relays.
 */
export async function* readSse(body: AsyncIterable<Buffer>, maxEvent: number): AsyncGenerator<SseEvent> {
  const decoder = new StringDecoder('utf8');
  let buf = '';
  let event: string | null = null;
  let id: string | null = null;
  let data: string[] | null = null;
  let size = 0;
  let skipLf = false;
  const line = (l: string): SseEvent | null => {
    if (l === '') {
      const out = data === null ? null : { event, data: data.join('\n'), id };
      event = null;
      data = null;
      size = 0;
      return out;
    }
    if (l.startsWith(':')) return null;
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      size += value.length + 1;
      if (size > maxEvent) throw new Error(`an event of more than ${maxEvent} characters`);
      (data ??= []).push(value);
    } else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
    return null;
  };
  for await (const chunk of body) {
    buf += decoder.write(chunk);
    let start = 0;
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c === 10 && skipLf && i === start) {
        skipLf = false;
        start = i + 1;
        continue;
      }
      skipLf = false;
      if (c !== 10 && c !== 13) continue;
      const ev = line(buf.slice(start, i));
      if (ev) yield ev;
      if (c === 13) skipLf = true;
      start = i + 1;
    }
    buf = buf.slice(start);
    if (buf.length > maxEvent) throw new Error(`a line of more than ${maxEvent} characters`);
  }
  buf += decoder.end();
  if (buf) line(buf);
}
