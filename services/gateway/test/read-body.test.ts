import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BodyTooLarge, readBody } from '../src/app.js';

/** How `readBody` ends for what a client sends, read by a real HTTP server with a 1 KiB limit. */
describe('readBody', () => {
  let server: Server;
  let outcomes: Promise<Buffer>[];
  let received: () => void;
  let port: number;

  beforeEach(async () => {
    outcomes = [];
    server = createServer((req: IncomingMessage, res) => {
      const outcome = readBody(req, 1024);
      outcomes.push(outcome);
      received();
      outcome.then(() => res.end('ok'), () => res.destroy());
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    port = (server.address() as AddressInfo).port;
  });

  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((ok) => server.close(ok));
  });

  /** Sends `chunks` without a Content-Length (chunked), one write each; `end` false leaves the body open. */
  function send(chunks: string[], end = true) {
    const arrived = new Promise<void>((ok) => (received = ok));
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/' });
    req.on('error', () => {});
    req.flushHeaders();
    for (const chunk of chunks) req.write(chunk);
    if (end) req.end();
    return { req, arrived };
  }

  it('joins a body sent in several chunks', async () => {
    const { arrived } = send(['{"a":', '"b"', '}']);
    await arrived;
    expect((await outcomes[0]!).toString()).toBe('{"a":"b"}');
  });

  it('refuses a chunked body once it passes the limit, without a Content-Length to go by', async () => {
    const { arrived } = send(['x'.repeat(1000), 'x'.repeat(100)], false);
    await arrived;
    await expect(outcomes[0]).rejects.toBeInstanceOf(BodyTooLarge);
  });

  it('refuses a declared Content-Length past the limit before reading', async () => {
    const arrived = new Promise<void>((ok) => (received = ok));
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'content-length': 2048 } });
    req.on('error', () => {});
    req.flushHeaders();
    await arrived;
    await expect(outcomes[0]).rejects.toBeInstanceOf(BodyTooLarge);
    req.destroy();
  });

  it('fails, rather than waiting forever, when the client hangs up before the body ends', async () => {
    const { req, arrived } = send(['{"partial":'], false);
    await arrived;
    req.destroy();
    await expect(outcomes[0]).rejects.toThrow();
  });
});
