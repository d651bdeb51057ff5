import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { healthv1 } from '@agenthub/proto';
import type { Db } from './db/index.js';
import { methodDefinition } from './grpc/server.js';
import { selfCheckCredentials, type GrpcTls } from './grpc/tls.js';
import type { Kv } from './kv/index.js';
import { listenFailure } from './listen.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

export interface OpsServerOptions {
  /** Host and port to bind; port 0 picks a free one. */
  host: string;
  port: number;
  metrics: Metrics;
  log: Logger;
  db: Db;
  kv: Kv;
  /** `host:port` of this process's gRPC server, asked over `grpc.health.v1` for readiness. */
  grpcAddress: string;
  /** The gRPC server's mutual TLS, when it uses it. */
  grpcTls?: GrpcTls;
  /** Each readiness check gives up after this long. */
  checkTimeoutMs?: number;
}

export interface ReadinessReport {
  ready: boolean;
  stopping: boolean;
  checks: Record<string, { ok: boolean; error?: string }>;
}

export interface OpsServer {
  /** `http://host:port` the ops endpoint answers on. */
  readonly url: string;
  readonly port: number;
  /** From now on `/readyz` answers 503, whatever the checks say. */
  markStopping(): void;
  readiness(): Promise<ReadinessReport>;
  close(): Promise<void>;
}

/** The address to dial for a server bound to `address` (a wildcard bind is reached on loopback). */
function dialable(address: string): string {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  const port = address.slice(colon + 1);
  if (host === '0.0.0.0' || host === '' ) return `127.0.0.1:${port}`;
  if (host === '::' || host === '[::]') return `[::1]:${port}`;
  return address;
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The operational HTTP endpoint of one service process (split mode), apart from its gRPC port:
 * `GET /metrics` (Prometheus), `/healthz` (200 while the process runs) and `/readyz` (200 when
 * the gRPC health service reports SERVING, the database answers `SELECT 1` and the key-value
 * store pings; 503 otherwise, and from the moment the process begins stopping).
 */
export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  const timeoutMs = options.checkTimeoutMs ?? 2_000;
  const healthClient = new grpc.Client(dialable(options.grpcAddress), selfCheckCredentials(options.grpcTls));
  const check = methodDefinition(healthv1.Health.method.check);
  let stopping = false;

  const grpcServing = () =>
    new Promise<void>((resolve, reject) => {
      healthClient.makeUnaryRequest(
        check.path,
        check.requestSerialize,
        check.responseDeserialize,
        create(healthv1.HealthCheckRequestSchema, { service: '' }),
        new grpc.Metadata(),
        { deadline: new Date(Date.now() + timeoutMs) },
        (err, response) => {
          if (err) return reject(new Error(err.details || err.message));
          const status = (response as healthv1.HealthCheckResponse).status;
          if (status === healthv1.HealthCheckResponse_ServingStatus.SERVING) resolve();
          else reject(new Error(healthv1.HealthCheckResponse_ServingStatus[status] ?? String(status)));
        },
      );
    });

  const readiness = async (): Promise<ReadinessReport> => {
    const probes: Record<string, () => Promise<unknown>> = {
      grpc: grpcServing,
      db: () => options.db.query('SELECT 1'),
      kv: () => options.kv.ping(),
    };
    const entries = await Promise.all(
      Object.entries(probes).map(async ([name, probe]) => {
        try {
          await withTimeout(probe(), timeoutMs, name);
          return [name, { ok: true }] as const;
        } catch (err) {
          return [name, { ok: false, error: err instanceof Error ? err.message : String(err) }] as const;
        }
      }),
    );
    const checks = Object.fromEntries(entries);
    return { ready: !stopping && entries.every(([, result]) => result.ok), stopping, checks };
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
    if (path === '/healthz') return send(200, 'application/json', JSON.stringify({ status: 'ok' }));
    if (path === '/readyz') {
      readiness().then(
        (report) => send(report.ready ? 200 : 503, 'application/json', JSON.stringify(report)),
        (err: unknown) => send(503, 'application/json', JSON.stringify({ ready: false, error: String(err) })),
      );
      return;
    }
    if (path === '/metrics') {
      options.metrics.registry.metrics().then(
        (text) => send(200, options.metrics.registry.contentType, text),
        (err: unknown) => {
          options.log.error({ err }, 'metrics collection failed');
          send(500, 'text/plain', 'metrics collection failed\n');
        },
      );
      return;
    }
    send(404, 'text/plain', 'not found\n');
  });
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    const failed = (err: Error) => reject(listenFailure(err, options.host, options.port, { host: 'OPS_HOST', port: 'OPS_PORT' }));
    server.once('error', failed);
    server.listen(options.port, options.host, () => {
      server.off('error', failed);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${host}:${port}`;
  options.log.info({ url }, 'ops endpoint listening');

  return {
    url,
    port,
    markStopping() {
      stopping = true;
    },
    readiness,
    async close() {
      stopping = true;
      healthClient.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
