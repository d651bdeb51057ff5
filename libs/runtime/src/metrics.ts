import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one process. One instance is made in `main` and handed to whatever
 * records into it; no module keeps a global registry, so tests can build as many hubs as they
 * like in one process.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly grpcServerCalls: Histogram<'service' | 'method' | 'code'>;
  readonly grpcClientCalls: Histogram<'service' | 'method' | 'code'>;
  readonly rpcRequests: Counter<'method' | 'code'>;
  readonly rpcDuration: Histogram<'method'>;
  readonly httpRequests: Counter<'route' | 'status'>;
  readonly limitedRequests: Counter<'reason' | 'tenant'>;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'agenthub_' });
    const buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60];
    this.grpcServerCalls = new Histogram({
      name: 'agenthub_grpc_server_handling_seconds',
      help: 'Time to handle a gRPC call, by service, method and status code.',
      labelNames: ['service', 'method', 'code'],
      buckets,
      registers: [this.registry],
    });
    this.grpcClientCalls = new Histogram({
      name: 'agenthub_grpc_client_handling_seconds',
      help: 'Time a gRPC call to another service took, by service, method and status code.',
      labelNames: ['service', 'method', 'code'],
      buckets,
      registers: [this.registry],
    });
    this.rpcRequests = new Counter({
      name: 'agenthub_jsonrpc_requests_total',
      help: 'JSON-RPC requests handled by the gateway, by method and JSON-RPC result code (0 = success).',
      labelNames: ['method', 'code'],
      registers: [this.registry],
    });
    this.rpcDuration = new Histogram({
      name: 'agenthub_jsonrpc_request_seconds',
      help: 'Time to answer one JSON-RPC request at the gateway, by method.',
      labelNames: ['method'],
      buckets,
      registers: [this.registry],
    });
    this.httpRequests = new Counter({
      name: 'agenthub_http_requests_total',
      help: 'HTTP requests served by the gateway, by route and status.',
      labelNames: ['route', 'status'],
      registers: [this.registry],
    });
    this.limitedRequests = new Counter({
      name: 'agenthub_limited_requests_total',
      help: 'Requests refused by a rate limit, concurrency cap or quota, by reason (key, tenant, address, waiting, or the quota) and tenant ("" before authentication).',
      labelNames: ['reason', 'tenant'],
      registers: [this.registry],
    });
  }
}
