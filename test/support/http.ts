import type { IncomingMessage } from 'node:http';

/** The whole body of a request to one of the test servers, as UTF-8 text. */
export const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (s += d));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });
