import type { HubConfig } from './config.js';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** One sample of a gauge read at scrape time. */
export interface GaugeSample<L extends string> {
  labels: Partial<Record<L, string>>;
  value: number;
}

/**
 * A tenant's use of one quota: its fullest scope (the workspace, agent or sender nearest the limit
 * for per-workspace and per-agent quotas; the tenant itself for per-tenant ones).
 */
export interface QuotaUsage {
  tenant: string;
  quota: string;
  used: number;
  limit: number;
}

/** One process's metrics as prom-client serializes them between processes. */
export type PeerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/** Label of the tenants past the `tenantLabels` first ones in agenthub_limited_requests_total. */
export const OTHER_TENANTS = '_other';

/** A gRPC call's duration, recorded under AgentHub's names and the names stock dashboards use. */
export interface GrpcCallRecorder {
  observe(labels: { service: string; method: string; code: string }, seconds: number): void;
}

/**
 * Prometheus metrics of one process. One instance is made in `main` and handed to whatever
 * records into it; no module keeps a global registry, so tests can build as many hubs as they
 * like in one process.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly grpcServerCalls: GrpcCallRecorder;
  readonly grpcClientCalls: GrpcCallRecorder;
  readonly rpcRequests: Counter<'method' | 'code'>;
  readonly rpcDuration: Histogram<'method'>;
  /** Calls that wait by design (blocking sends, long-polls, streams), kept out of rpcDuration. */
  readonly rpcWaitDuration: Histogram<'method'>;
  readonly httpRequests: Counter<'route' | 'status'>;
  private readonly limitedRequests: Counter<'reason' | 'tenant'>;
  /** HUB_METRICS_TENANTS: most tenants named in one per-tenant family. */
  private readonly tenantLabels: number;
  /** HUB_METRICS_QUOTA_REFRESH_MS: how long a quota usage read serves scrapes. */
  private readonly quotaRefreshMs: number;
  private readonly labelledTenants = new Set<string>();
  /** Registries of other processes of the same hub (`serve all` in two processes), read at scrape time. */
  private readonly peers: Array<() => Promise<PeerMetrics>> = [];

  /**
   * Adds another process's metrics (its `snapshot()`) to this one's `exposition()`: one scrape
   * of the hub whatever the number of its processes. Series present in both are summed, as
   * Prometheus would sum them across instances.
   */
  addPeer(read: () => Promise<PeerMetrics>): void {
    this.peers.push(read);
  }

  /** This process's metrics in the form a peer reads them (see addPeer). */
  snapshot(): Promise<PeerMetrics> {
    return this.registry.getMetricsAsJSON();
  }

  /** The Prometheus text of this process and its peers, and its content type. */
  async exposition(): Promise<{ contentType: string; text: string }> {
    if (!this.peers.length) return { contentType: this.registry.contentType, text: await this.registry.metrics() };
    const all = await Promise.all([this.snapshot(), ...this.peers.map((read) => read())]);
    const merged = AggregatorRegistry.aggregate(all);
    return { contentType: merged.contentType, text: await merged.metrics() };
  }

  /** A process's registry as its configuration sets it (HUB_METRICS, HUB_METRICS_TENANTS, HUB_METRICS_QUOTA_REFRESH_MS). */
  static fromConfig(config: Pick<HubConfig, 'HUB_METRICS' | 'HUB_METRICS_TENANTS' | 'HUB_METRICS_QUOTA_REFRESH_MS'>): Metrics {
    return new Metrics({ defaultMetrics: config.HUB_METRICS, tenantLabels: config.HUB_METRICS_TENANTS, quotaRefreshMs: config.HUB_METRICS_QUOTA_REFRESH_MS });
  }

  constructor(options: { defaultMetrics?: boolean; tenantLabels?: number; quotaRefreshMs?: number } = {}) {
    this.tenantLabels = options.tenantLabels ?? 100;
    this.quotaRefreshMs = options.quotaRefreshMs ?? 60_000;
    // Unprefixed (process_*, nodejs_*), as the stock Node.js dashboards expect.
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
    const buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60];
    this.grpcServerCalls = this.grpcRecorder('server', 'Time to handle a gRPC call', buckets);
    this.grpcClientCalls = this.grpcRecorder('client', 'Time a gRPC call to another service took', buckets);
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
    this.rpcWaitDuration = new Histogram({
      name: 'agenthub_jsonrpc_wait_seconds',
      help: 'Time of JSON-RPC calls that wait by design (blocking SendMessage, inbox.poll with wait_ms, streams), by method.',
      labelNames: ['method'],
      buckets: [0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800],
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
      help: 'Requests refused by a rate limit, concurrency cap or quota, by reason (key, tenant, address, waiting, or the quota) and tenant ("" before authentication or for the operator; "_other" past the HUB_METRICS_TENANTS first tenants refused).',
      labelNames: ['reason', 'tenant'],
      registers: [this.registry],
    });
  }

  /**
   * Counts a refusal. A refused tenant keeps its own series, up to HUB_METRICS_TENANTS of them
   * per process (tenants are unbounded, Prometheus series must not be); later ones count as
   * "_other", so the total stays right and the first noisy tenants stay visible.
   */
  limited(reason: string, tenantId: string): void {
    let tenant = tenantId;
    if (tenant && !this.labelledTenants.has(tenant)) {
      if (this.labelledTenants.size < this.tenantLabels) this.labelledTenants.add(tenant);
      else tenant = OTHER_TENANTS;
    }
    this.limitedRequests.inc({ reason, tenant });
  }

  /**
   * Quotas' usage as three gauges by tenant and quota: `agenthub_quota_used`,
   * `agenthub_quota_limit` and `agenthub_quota_usage_ratio` (used / limit). `read` runs the
   * service's grouped usage query over all tenants; its answer serves scrapes for
   * HUB_METRICS_QUOTA_REFRESH_MS, so a scrape every few seconds costs one query a minute. Of each
   * quota, only the HUB_METRICS_TENANTS tenants nearest their limit are shown: those an SRE needs,
   * with a bounded number of series however many tenants there are.
   */
  quotaUsage(read: (top: number) => Promise<QuotaUsage[]>): () => void {
    let last: { at: number; rows: Promise<QuotaUsage[]> } | undefined;
    const shared = () => {
      // Strictly older: with an interval of 0, the gauges one scrape collects in the same
      // millisecond still share a read.
      if (!last || Date.now() - last.at > this.quotaRefreshMs) {
        const rows = read(this.tenantLabels).then((all) => nearest(all, this.tenantLabels));
        const current = { at: Date.now(), rows };
        // A failed read is not kept: the next scrape tries again.
        rows.catch(() => {
          if (last === current) last = undefined;
        });
        last = current;
      }
      return last.rows;
    };
    const labels = ['tenant', 'quota'] as const;
    const of = (value: (row: QuotaUsage) => number) => async () => (await shared()).map((row) => ({ labels: { tenant: row.tenant, quota: row.quota }, value: value(row) }));
    const stops = [
      this.gauge('agenthub_quota_used', "A tenant's use of a quota (its fullest workspace, agent or sender for per-workspace and per-agent quotas), for the tenants nearest their limit.", labels, of((row) => row.used)),
      this.gauge('agenthub_quota_limit', "A tenant's limit of a quota (its override, else the HUB_QUOTA_* default).", labels, of((row) => row.limit)),
      this.gauge('agenthub_quota_usage_ratio', "agenthub_quota_used / agenthub_quota_limit: 1 means the next request is refused.", labels, of((row) => row.used / row.limit)),
    ];
    return () => stops.forEach((stop) => stop());
  }

  private readonly readers = new Map<string, Set<() => Promise<GaugeSample<string>[]>>>();

  /**
   * A gauge read when Prometheus scrapes, never on a request's path: `read` runs one cheap query.
   * Several readers may feed one name (each service of an all-in-one process adds its own
   * labels). A failed read leaves its samples out of that scrape (and counts in
   * agenthub_metrics_read_errors_total) rather than failing the whole scrape. Returns how to
   * remove the reader (when its service stops).
   */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], read: () => Promise<GaugeSample<L>[]>): () => void {
    let readers = this.readers.get(name);
    if (!readers) {
      const all = new Set<() => Promise<GaugeSample<string>[]>>();
      readers = all;
      this.readers.set(name, all);
      const errors = this.readErrors();
      new Gauge<L>({
        name,
        help,
        labelNames,
        registers: [this.registry],
        async collect() {
          this.reset();
          await Promise.all(
            [...all].map(async (reader) => {
              try {
                for (const sample of await reader()) this.set(sample.labels as never, sample.value);
              } catch {
                errors.inc({ metric: name });
              }
            }),
          );
        },
      });
    }
    const reader = read as () => Promise<GaugeSample<string>[]>;
    readers.add(reader);
    return () => readers.delete(reader);
  }

  /**
   * A queue as two gauges from one read per scrape: `<name>` (items waiting) and
   * `<name>_oldest_age_seconds` (how long the oldest has waited; 0 when none).
   */
  backlog<L extends string>(
    name: string,
    what: string,
    labelNames: readonly L[],
    read: () => Promise<{ labels: Partial<Record<L, string>>; count: number; oldestMs: number | null }[]>,
  ): () => void {
    let last: { at: number; rows: ReturnType<typeof read> } | undefined;
    // Both gauges are collected in one scrape: they share its read.
    const shared = () => {
      if (!last || Date.now() - last.at > 1_000) last = { at: Date.now(), rows: read() };
      return last.rows;
    };
    const removeCount = this.gauge(name, `${what}: how many are waiting.`, labelNames, async () =>
      (await shared()).map((row) => ({ labels: row.labels, value: row.count })),
    );
    const removeAge = this.gauge(`${name}_oldest_age_seconds`, `${what}: seconds the oldest has waited (0 when none).`, labelNames, async () => {
      const now = Date.now();
      return (await shared()).map((row) => ({ labels: row.labels, value: row.oldestMs === null ? 0 : Math.max(0, (now - row.oldestMs) / 1000) }));
    });
    return () => {
      removeCount();
      removeAge();
    };
  }

  private readErrorCounter: Counter<'metric'> | undefined;

  private readErrors(): Counter<'metric'> {
    this.readErrorCounter ??= new Counter({
      name: 'agenthub_metrics_read_errors_total',
      help: 'Scrape-time reads of a gauge that failed (the gauge is empty for that scrape), by metric.',
      labelNames: ['metric'],
      registers: [this.registry],
    });
    return this.readErrorCounter;
  }

  /**
   * `agenthub_grpc_<side>_handling_seconds{service,method,code}` plus the go-grpc-prometheus names
   * the stock gRPC dashboards query: `grpc_<side>_handled_total` and
   * `grpc_<side>_handling_seconds` with grpc_type, grpc_service, grpc_method, grpc_code.
   */
  private grpcRecorder(side: 'server' | 'client', help: string, buckets: number[]): GrpcCallRecorder {
    const own = new Histogram({
      name: `agenthub_grpc_${side}_handling_seconds`,
      help: `${help}, by service, method and status code.`,
      labelNames: ['service', 'method', 'code'],
      buckets,
      registers: [this.registry],
    });
    const handled = new Counter({
      name: `grpc_${side}_handled_total`,
      help: `Unary gRPC calls ${side === 'server' ? 'completed by this server' : 'completed by this client'}, by status code.`,
      labelNames: ['grpc_type', 'grpc_service', 'grpc_method', 'grpc_code'],
      registers: [this.registry],
    });
    const seconds = new Histogram({
      name: `grpc_${side}_handling_seconds`,
      help: `${help} (unary calls).`,
      labelNames: ['grpc_type', 'grpc_service', 'grpc_method'],
      buckets,
      registers: [this.registry],
    });
    return {
      observe(labels, value) {
        own.observe(labels, value);
        // In-process calls (HUB_TRANSPORT=inproc) are not gRPC on the wire and report no code.
        if (labels.code === 'LOCAL') return;
        const standard = { grpc_type: 'unary', grpc_service: labels.service, grpc_method: labels.method };
        handled.inc({ ...standard, grpc_code: grpcCode(labels.code) });
        seconds.observe(standard, value);
      },
    };
  }
}

/** Of each quota, the `top` rows of the highest usage ratio. */
function nearest(rows: QuotaUsage[], top: number): QuotaUsage[] {
  const byQuota = new Map<string, QuotaUsage[]>();
  for (const row of rows) {
    if (row.limit <= 0) continue;
    const list = byQuota.get(row.quota);
    if (list) list.push(row);
    else byQuota.set(row.quota, [row]);
  }
  return [...byQuota.values()].flatMap((list) => list.sort((a, b) => b.used / b.limit - a.used / a.limit).slice(0, top));
}

/** grpc-js names codes in capitals (`NOT_FOUND`); the stock dashboards use Go's (`NotFound`). */
function grpcCode(code: string): string {
  if (code === 'OK') return 'OK';
  return code.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}
