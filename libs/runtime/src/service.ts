import { join } from 'node:path';
import { ensurePrivateDir } from './private-files.js';
import type { Bus } from './bus/bus.js';
import { openBus } from './bus/open.js';
import { ConfigError, type HubConfig } from './config.js';
import { embeddedDataDir, migrate, openDb, type Db, type EmbeddedCluster } from './db/index.js';
import type { ClientOptions } from './grpc/client.js';
import type { LocalTransport } from './grpc/local.js';
import { GrpcServer, type GrpcServerOptions } from './grpc/server.js';
import { InternalKey } from './grpc/signature.js';
import { loadGrpcTls, type GrpcTls } from './grpc/tls.js';
import { bindProblem, listenFailure } from './listen.js';
import { openKv, type Kv } from './kv/index.js';
import type { Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { startOpsServer } from './ops-server.js';
import type { Stop } from './process.js';
import { publishBeforeReturning } from './publish-barrier.js';
import { hasOutbox, reportOutboxLag, startRelay } from './relay.js';

/** What every service gets from whoever starts it (its `main.ts`, or the all-in-one hub). */
export interface ServiceDeps {
  db: Db;
  kv: Kv;
  log: Logger;
  metrics: Metrics;
  /** `host:port` to bind; port 0 picks a free one. */
  listen: string;
  /** Signs the calls this service makes and checks the ones it takes. */
  internalKey: InternalKey;
  /** Mutual TLS for the calls it takes and makes (split deployments that enable it). */
  tls?: GrpcTls;
  /** Default deadline of calls this service makes to others. */
  grpcTimeoutMs: number;
  /** Set in the all-in-one mode with HUB_TRANSPORT=inproc: calls between services skip the network. */
  local?: LocalTransport;
  /** The event log; with it, a service whose schema has an `outbox` table relays it there. */
  bus?: Bus;
  /** How often the outbox relay polls (OUTBOX_POLL_MS); each committed outbox write also wakes it (OUTBOX_CHANNEL). */
  outboxPollMs?: number;
  /** Least time between relay passes that commits wake (OUTBOX_PASS_INTERVAL_MS). */
  outboxPassIntervalMs?: number;
  /** GRPC_MAX_CONNECTION_AGE_MS and its grace; the server's defaults when absent. */
  connectionAge?: Pick<GrpcServerOptions, 'maxConnectionAgeMs' | 'maxConnectionAgeGraceMs'>;
}

/** Options for the clients a service makes of other services, from its own deps. */
export function clientOptions(deps: Pick<ServiceDeps, 'grpcTimeoutMs' | 'metrics' | 'internalKey' | 'tls' | 'local'>): ClientOptions {
  return { defaultTimeoutMs: deps.grpcTimeoutMs, metrics: deps.metrics, internalKey: deps.internalKey, tls: deps.tls, local: deps.local };
}

export interface RunningService {
  readonly name: string;
  /** `host:port` the gRPC server listens on. */
  readonly address: string;
  /** Stops serving (draining calls for up to `graceMs`); closes nothing it was given. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Applies the service's migrations, starts its gRPC server, and marks it serving. `register` gets
 * the Db its handlers use: with `publishBeforeAnswer`, a write to the outbox returns only once
 * the row is on the bus (services whose events share their keys with another service's, so a
 * client that waits for each answer sees their events in the order of its calls).
 */
export async function serveGrpc(
  name: string,
  deps: ServiceDeps,
  options: { schema: string; migrations: URL; publishBeforeAnswer?: boolean },
  register: (server: GrpcServer, db: Db) => void,
): Promise<RunningService> {
  await migrate(deps.db, { schema: options.schema, dir: options.migrations, log: deps.log });
  const relayOutbox = deps.bus !== undefined && (await hasOutbox(deps.db));
  const server = new GrpcServer({ log: deps.log, metrics: deps.metrics, internalKey: deps.internalKey, tls: deps.tls, ...deps.connectionAge });
  const relay =
    relayOutbox && deps.bus
      ? startRelay({ db: deps.db, bus: deps.bus, log: deps.log.child({ component: 'outbox-relay' }), pollMs: deps.outboxPollMs, passIntervalMs: deps.outboxPassIntervalMs })
      : undefined;
  register(server, relay && options.publishBeforeAnswer ? publishBeforeReturning(deps.db, relay) : deps.db);
  const host = deps.listen.slice(0, deps.listen.lastIndexOf(':'));
  const port = await server.listen(deps.listen).catch(async (err: unknown) => {
    await relay?.stop();
    const wanted = Number(deps.listen.slice(deps.listen.lastIndexOf(':') + 1));
    const bare = host.replace(/^\[(.*)\]$/, '$1');
    throw listenFailure((await bindProblem(bare, wanted)) ?? err, bare, wanted, { host: 'GRPC_HOST', port: 'GRPC_PORT' });
  });
  const address = `${host}:${port}`;
  deps.local?.register(address, server);
  deps.log.info({ address }, 'gRPC service listening');
  const stopOutboxLag = relay ? reportOutboxLag(deps.metrics, name, deps.db) : undefined;
  return {
    name,
    address,
    async stop(graceMs) {
      stopOutboxLag?.();
      await server.shutdown(graceMs);
      // After the calls drained, so the batch in flight includes what they wrote if it can.
      await relay?.stop();
    },
  };
}

/**
 * The one place a service's backends are chosen from configuration: PostgreSQL and Redis when
 * their URLs are set, else PGlite under `HUB_DATA_DIR/<service>` (see embeddedDataDir), or on
 * `cluster` when the embedded databases are in memory, and an in-process Kv.
 */
export async function openBackends(config: HubConfig, service: string, options: { kv?: Kv; cluster?: EmbeddedCluster } = {}): Promise<{ db: Db; kv: Kv }> {
  const db = await openDb({
    url: config.DATABASE_URL,
    dataDir: embeddedDataDir(config, service),
    schema: service,
    maxConnections: config.DATABASE_POOL_SIZE,
    preparedStatements: config.DATABASE_PREPARED_STATEMENTS,
    cluster: options.cluster,
  });
  const kv = options.kv ?? (await openKv({ url: config.REDIS_URL, prefix: config.REDIS_PREFIX }));
  return { db, kv };
}

/**
 * The body of every gRPC service's `main.ts`: opens the backends the configuration names, starts
 * the service on GRPC_HOST:GRPC_PORT, and returns how to stop it and close what was opened.
 */
export async function serviceProcess(
  config: HubConfig,
  log: Logger,
  name: string,
  start: (deps: ServiceDeps) => Promise<RunningService>,
  /** `bus`: the service publishes an outbox or consumes the event log (identity does neither). */
  options: { bus?: boolean } = {},
): Promise<Stop> {
  const { internalKey, tls } = await splitSecurity(config);
  const metrics = Metrics.fromConfig(config);
  if (!config.DATABASE_URL) await ensurePrivateDir(config.HUB_DATA_DIR, log);
  const { db, kv } = await openBackends(config, name);
  let bus: Bus | undefined;
  try {
    if (options.bus) bus = await openBus(config, log, { kv });
    const service = await start({
      db,
      kv,
      log,
      metrics,
      listen: `${config.GRPC_HOST}:${config.GRPC_PORT}`,
      grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS,
      internalKey,
      tls,
      bus,
      outboxPollMs: config.OUTBOX_POLL_MS,
      outboxPassIntervalMs: config.OUTBOX_PASS_INTERVAL_MS,
      connectionAge: { maxConnectionAgeMs: config.GRPC_MAX_CONNECTION_AGE_MS, maxConnectionAgeGraceMs: config.GRPC_MAX_CONNECTION_AGE_GRACE_MS },
    });
    // The ops endpoint (metrics, liveness, readiness) on OPS_HOST:OPS_PORT; readiness turns 503
    // the moment stopping begins, before the gRPC server drains.
    const ops = await startOpsServer({
      host: config.OPS_HOST ?? config.GRPC_HOST,
      port: config.OPS_PORT,
      metrics,
      log,
      db,
      kv,
      grpcAddress: service.address,
      grpcTls: tls,
    }).catch(async (err: unknown) => {
      await service.stop(0);
      throw err;
    });
    return async () => {
      ops.markStopping();
      const stopping = performance.now();
      await service.stop(config.HUB_SHUTDOWN_GRACE_MS);
      // Beside process.ts's 'stopping' and 'stopped': a slow stop shows whether calls or closing took it.
      log.info({ ms: Math.round(performance.now() - stopping) }, 'calls drained');
      await ops.close();
      await bus?.close();
      await db.close();
      await kv.close();
    };
  } catch (err) {
    await bus?.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    await kv.close().catch(() => undefined);
    throw err;
  }
}

/**
 * How a split-mode process (a service, or the gateway) secures its internal calls: the key every
 * call is signed with, which it must be given (there is no unauthenticated internal mode, loopback
 * included), and mutual TLS when configured.
 */
export async function splitSecurity(config: HubConfig): Promise<{ internalKey: InternalKey; tls: GrpcTls | undefined }> {
  if (!config.HUB_INTERNAL_KEY) {
    throw new ConfigError(
      'HUB_INTERNAL_KEY is required in split mode: the same base64 key (openssl rand -base64 32) on every process; it signs every internal call (it replaces HUB_INTERNAL_TOKEN)',
    );
  }
  return { internalKey: InternalKey.fromBase64(config.HUB_INTERNAL_KEY), tls: await loadGrpcTls(config) };
}
