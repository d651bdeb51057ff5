import { createServer, request, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { duplexPair, type Duplex } from 'node:stream';

export interface Peer {
  /** The address the app sees the request come from (`socket.remoteAddress`). */
  address: string;
  /** Whether it arrived over TLS (`socket.encrypted`). */
  encrypted?: boolean;
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * HTTP/1.1 to a request listener (a Koa app's `callback()`) over in-memory stream pairs: node's
 * own parser and serializer on both ends, as over a socket, and no port. Real sockets are for the
 * end-to-end tests.
 */
export class InMemoryHttp {
  private readonly server: Server;

  constructor(listener: RequestListener) {
    this.server = createServer(listener);
  }

  /** A new connection from `peer`; the client end, to write raw bytes to and read the answer from. */
  connect(peer: Peer = { address: '127.0.0.1' }): Duplex {
    const [client, server] = duplexPair();
    Object.defineProperties(server, {
      remoteAddress: { value: peer.address },
      ...(peer.encrypted ? { encrypted: { value: true } } : {}),
    });
    this.server.emit('connection', server);
    return client;
  }

  /** One request on its own connection, answered in full. */
  request(path: string, options: { method?: string; headers?: Record<string, string>; body?: string; peer?: Peer } = {}): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const sent = request(
        { path, method: options.method ?? 'GET', headers: options.headers, createConnection: () => this.connect(options.peer) },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, text }));
          response.on('error', reject);
        },
      );
      sent.on('error', reject);
      sent.end(options.body);
    });
  }
}
