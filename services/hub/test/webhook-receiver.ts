import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { answerAfter } from '@agenthub/testing';

/**
 * A real HTTP webhook receiver for the end-to-end tests: it listens on 127.0.0.1, records every
 * request it gets (raw body, headers, arrival time, the status it answered), answers what the
 * test tells it to, and can go down (port closed: connection refused) and come back on the same
 * port. Nothing here knows the hub's code: signatures are checked by `verifySignature`, written
 * from the Standard Webhooks specification with node:crypto only.
 */

export interface Received {
  /** Path of the request, e.g. `/hooks/a` (each webhook in a test gets its own path). */
  path: string;
  method: string;
  /** Header names lowercased, values joined. */
  headers: Record<string, string>;
  /** The body exactly as it arrived (the signed bytes). */
  raw: string;
  /** `raw` parsed as JSON, or undefined if it was not JSON. */
  body: any;
  /** Date.now() when the body was complete. */
  at: number;
  /** The status this receiver answered. */
  status: number;
}

/** What to answer a request: a status code, optionally after a delay (ms). */
export type Reply = number | { status: number; delayMs?: number };
export type Responder = (request: Received, earlier: readonly Received[]) => Reply;

export class WebhookReceiver {
  readonly requests: Received[] = [];
  private responder: Responder = () => 204;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private port = 0;

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await receiver.up();
    return receiver;
  }

  /** URL of `path` on this receiver (`http://127.0.0.1:<port><path>`). */
  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Sets how every later request is answered (default: 204 at once). */
  respond(responder: Responder): void {
    this.responder = responder;
  }

  /** Requests that arrived on `path` (all paths when omitted), in arrival order. */
  on(path?: string): Received[] {
    return path === undefined ? [...this.requests] : this.requests.filter((r) => r.path === path);
  }

  /** Listens (again) — on the same port after `down()`. */
  async up(): Promise<void> {
    if (this.server) return;
    const server = createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 1000;
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    // A port just released can take a moment to be bindable again.
    for (let attempt = 0; ; attempt += 1) {
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(this.port, '127.0.0.1', () => {
            server.off('error', reject);
            resolve();
          });
        });
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 50) throw err;
        await sleep(100);
      }
    }
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and drops open connections: senders get connection refused / reset. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await closed;
  }

  close(): Promise<void> {
    return this.down();
  }

  /**
   * Polls `check` every 25 ms until it returns something other than undefined/false, and returns
   * that; fails after `timeoutMs` with `what` and a summary of what did arrive.
   */
  async waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      if (Date.now() > deadline) {
        const summary = this.requests.map((r) => `${r.path} ${r.headers['webhook-id'] ?? '?'} ${r.body?.event ?? '?'} → ${r.status}`).join('\n  ');
        throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}; received ${this.requests.length} request(s):\n  ${summary}`);
      }
      await sleep(25);
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      const request: Received = { path: req.url ?? '/', method: req.method ?? '', headers, raw, body, at: Date.now(), status: 0 };
      let reply: Reply;
      try {
        reply = this.responder(request, this.requests);
      } catch {
        reply = 500;
      }
      const { status, delayMs = 0 } = typeof reply === 'number' ? { status: reply } : reply;
      request.status = status;
      this.requests.push(request);
      const answer = () => {
        res.statusCode = status;
        res.end(status === 204 ? undefined : '{}');
      };
      if (delayMs > 0) answerAfter(res, delayMs, answer);
      else answer();
    });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Standard Webhooks verification (https://www.standardwebhooks.com/): the signed content is
 * `${webhook-id}.${webhook-timestamp}.${body}`, the key is the secret's base64 part (after
 * `whsec_`), the signature header is a space-separated list of `v1,<base64 HMAC-SHA256>`; one
 * match is enough. The timestamp must be within `toleranceSeconds` of now (replay protection).
 */
export function verifySignature(secret: string, request: Pick<Received, 'headers' | 'raw'>, toleranceSeconds = 300): boolean {
  const id = request.headers['webhook-id'];
  const timestamp = request.headers['webhook-timestamp'];
  const header = request.headers['webhook-signature'];
  if (!id || !timestamp || !header || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) return false;
  if (!secret.startsWith('whsec_')) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${request.raw}`).digest();
  return signatures(request).some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected));
}

/** The `v1` signatures of a request's `webhook-signature` header, decoded. */
export function signatures(request: Pick<Received, 'headers'>): Buffer[] {
  const header = request.headers['webhook-signature'] ?? '';
  return header
    .split(' ')
    .filter(Boolean)
    .map((entry) => entry.split(','))
    .filter(([version, value]) => version === 'v1' && value !== undefined)
    .map(([, value]) => Buffer.from(value!, 'base64'));
}
