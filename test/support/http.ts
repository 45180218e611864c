import { request, type ClientRequest, type IncomingMessage } from 'node:http';

/** The whole body of a request to one of the test servers, as UTF-8 text. */
export const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (s += d));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });

/** A POST of `body` as JSON whose caller reads the response head, then nothing until it resumes `res` (a caller that stopped reading). */
export async function pausedPost(url: string, apiKey: string, body: unknown): Promise<{ req: ClientRequest; res: IncomingMessage }> {
  const req = request(url, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' } });
  req.end(JSON.stringify(body));
  const res = await new Promise<IncomingMessage>((r, j) => req.on('response', r).on('error', j));
  res.pause();
  return { req, res };
}
