import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '@agenthub/runtime';

/**
 * `GET /metrics` alone on its own port, apart from the public one, so an Ingress in front of the
 * gateway never exposes it; anything else gets 404.
 */
export async function serveMetrics(metrics: Metrics, listen: { host: string; port: number }): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found\n');
      return;
    }
    metrics.exposition().then(
      ({ contentType, text }) => res.writeHead(200, { 'Content-Type': contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
