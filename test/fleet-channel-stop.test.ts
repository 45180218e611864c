import { connect, type Socket } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CHANNEL_PATH } from '@svc/shared';
import { startTestGateway } from './support/gateway.ts';

/**
 * A control plane that stops while agents dial in: an upgrade to the agent channel that arrives after the channel
 * closed is answered 503 and its connection ends, so the HTTP server's close (and the process's exit) does not
 * wait on a socket nobody answers.
 */
const t = await startTestGateway();
afterAll(async () => {
  await t.close();
});

const upgradeRequest = (port: number) =>
  `GET ${CHANNEL_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.from('0123456789abcdef').toString('base64')}\r\n\r\n`;

it('answers 503 to an agent dialling in during the stop, and the stop ends', async () => {
  const port = Number(new URL(t.url).port);
  // A connection opened before the stop, its upgrade sent after the channel is closed.
  const late: Socket = connect(port, '127.0.0.1');
  await new Promise((r) => late.once('connect', r));
  const answer = new Promise<string>((resolve) => {
    let got = '';
    late.on('data', (d) => (got += d.toString('latin1')));
    late.on('close', () => resolve(got));
  });
  // An agent on the channel: the stop ends its connection first.
  const agent = new WebSocket(`${t.url.replace('http:', 'ws:')}${CHANNEL_PATH}`);
  await new Promise((r) => agent.once('open', r));
  const agentClosed = new Promise((r) => agent.once('close', r));
  const stopped = t.stop();
  await agentClosed;
  late.write(upgradeRequest(port));
  expect(await answer).toMatch(/^HTTP\/1\.1 503 /);
  await stopped; // without an answer for the late upgrade, this waits for ever
});
