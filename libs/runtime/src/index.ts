/**
 * Shared runtime of every AgentHub process: errors, the gRPC bridge, configuration, logging,
 * metrics, and the adapters for the relational store and the key-value/pub-sub backend.
 */
export { HubError, Reason } from './errors.js';
export * from './grpc/index.js';
export { loadConfig, ConfigError, egressAllowPrivate, type HubConfig } from './config.js';
export { createLogger, REDACTED_PATHS, type Logger, type LoggerOptions } from './logger.js';
export { resolveLogFormat, prettyDestination, type LogFormat, type LogFormatSetting } from './log-format.js';
export { ListenError, listenFailure } from './listen.js';
export { Metrics, type GaugeSample, type GrpcCallRecorder } from './metrics.js';
export { ensurePrivateDir, ensurePrivateFile } from './private-files.js';
export * from './db/index.js';
export * from './kv/index.js';
export { newId, newSecret, sha256Hex } from './ids.js';
export { serveGrpc, openBackends, serviceProcess, splitSecurity, clientOptions, type ServiceDeps, type RunningService } from './service.js';
export { authCacheKey, AUTH_LOCAL_LEASE_MS, AUTH_REVOKED_CHANNEL, REVOKED_KEY_TOMBSTONE, MAX_AUTH_CACHE_MS, TOMBSTONE_TTL_MS } from './auth-cache.js';
export { runProcess, SUPPORTED_NODE_MAJOR, type Stop } from './process.js';
export { startOpsServer, type OpsServer, type OpsServerOptions, type ReadinessReport } from './ops-server.js';
export { appendEvent, OUTBOX_INSERT_COLUMNS, outboxValues, OUTBOX_TABLE_SQL, WORKSPACE_EVENTS_TOPIC, type OutboxEvent, type EventPayload } from './outbox.js';
export * from './bus/index.js';
export { startRelay, notifyOutboxWrites, hasOutbox, reportOutboxLag, type Relay, type RelayOptions, type OutboxNotifyingDb } from './relay.js';
export * from './egress/index.js';
