/**
 * Shared runtime of every AgentHub process: errors, the gRPC bridge, configuration, logging,
 * metrics, and the adapters for the relational store and the key-value/pub-sub backend.
 */
/** The one error type services throw: a Reason from the proto table and a caller-safe message; anything else becomes INTERNAL, its cause logged, never sent. */
export { HubError, isFailure, Reason } from './errors.js';
/** Cancellation: the HubError a call stopped by its signal fails with (DEADLINE_EXCEEDED at the deadline, UNAVAILABLE when the caller left). */
export { abortError, throwIfAborted, deadlineExceeded, detachedSignal, DETACHED_TIMEOUT_MS } from './abort.js';
/** The gRPC bridge: servers that verify every call's signature, typed clients with deadlines, the in-process transport, status ↔ HubError both ways. */
export * from './grpc/index.js';
/** Configuration, parsed once at start: loadConfig throws one ConfigError naming every bad variable; nothing reads the environment elsewhere. */
export { loadConfig, ConfigError, egressAllowPrivate, type HubConfig } from './config.js';
/** Quotas the operator overrides per tenant, and the reader services check them with. */
export { QuotaOverrides, TENANT_QUOTAS, type TenantQuota } from './quotas.js';
/** pino loggers; REDACTED_PATHS keeps secrets, API keys and SQL parameters out of every line. */
export { createLogger, REDACTED_PATHS, type Logger, type LoggerOptions } from './logger.js';
/** LOG_FORMAT: JSON, or pretty lines on a terminal showing only what the JSON (already redacted) holds. */
export { resolveLogFormat, prettyDestination, type LogFormat, type LogFormatSetting } from './log-format.js';
/** A taken or unusable listen address, named by its variables; runProcess prints it without a stack and exits 3. */
export { ListenError, listenFailure } from './listen.js';
/** The process's Prometheus registry and the gRPC call histograms; one per process. */
export { Metrics, OTHER_TENANTS, type GaugeSample, type GrpcCallRecorder, type PeerMetrics, type QuotaUsage } from './metrics.js';
/** The data directory 0700 and key files 0600, repaired with a warning when wider. */
export { ensurePrivateDir, ensurePrivateFile } from './private-files.js';
/** The relational store: PostgreSQL or PGlite behind one Db, one schema per service, migrations applied in order once. */
export * from './db/index.js';
/** Key-value and pub/sub: Redis, or an in-process MemoryKv (one process only). */
export * from './kv/index.js';
/** Random ids (`prefix_`, about 103 bits), secrets (`prefix_`, 256 bits) and SHA-256 hex digests. */
export { newId, newSecret, sha256Hex } from './ids.js';
/** Service wiring: backends from config, the gRPC server with its outbox relay, split-mode security (throws ConfigError without HUB_INTERNAL_KEY). */
export { serveGrpc, openBackends, serviceProcess, splitSecurity, clientOptions, type ServiceDeps, type RunningService } from './service.js';
/** The gateway's API-key cache: a revoked key's tombstone outlives every cached entry, so it fails on the very next call. */
export { authCacheKey, AUTH_LOCAL_LEASE_MS, AUTH_REVOKED_CHANNEL, REVOKED_KEY_TOMBSTONE, MAX_AUTH_CACHE_MS, TOMBSTONE_TTL_MS } from './auth-cache.js';
/** A serving process's heap: allowed to grow to twice what it keeps, unless node's command line says otherwise. */
export { limitHeapGrowth } from './heap.js';
/** A process's life: parse config, start, stop gracefully on SIGTERM/SIGINT; operator mistakes exit with a message and a documented status. */
export { processLogger, runProcess, SUPPORTED_NODE_MAJOR, unsupportedNodeWarning, type Stop } from './process.js';
/** /metrics, /healthz, /readyz (503 from the moment stopping begins) on the ops port. */
export { startOpsServer, type OpsServer, type OpsServerOptions, type ReadinessReport } from './ops-server.js';
/** The transactional outbox: events are written in the same transaction as their change, in order per partition key. */
export { appendEvent, OUTBOX_CHANNEL, OUTBOX_INSERT_COLUMNS, outboxValues, OUTBOX_TABLE_SQL, WORKSPACE_EVENTS_TOPIC, type OutboxEvent, type EventPayload } from './outbox.js';
/** The event log: Kafka, or the embedded log in the database; at least once, in order per key, offsets committed after the handler resolves. */
export * from './bus/index.js';
/** The outbox relay: publishes committed outbox rows in order, marks a row only after the bus stored it, retries with backoff. */
export { publishBeforeReturning } from './publish-barrier.js';
export { startRelay, hasOutbox, reportOutboxLag, type Relay, type RelayOptions } from './relay.js';
/** The egress guard, the only way out to peers: global unicast only unless allowed, DNS pinned to checked addresses, no redirects, bounded responses. */
export * from './egress/index.js';
// Tracing: startTracing once per process; withSpan/openSpan/withRemoteParent/currentTraceparent at the choke points (no-ops while off).
export { startTracing, tracingOn, tracingRequested, withSpan, openSpan, withRemoteParent, contextOf, currentTraceparent, injectTraceparent, traceFields, SpanKind, SpanStatusCode, TRACEPARENT, type TracingOptions, type SpanOptions, type OpenSpan } from './tracing.js';
