import { join } from 'node:path';
import { ensurePrivateDir } from './private-files.js';
import type { Bus } from './bus/bus.js';
import { openBus } from './bus/open.js';
import type { HubConfig } from './config.js';
import { migrate, openDb, type Db } from './db/index.js';
import type { ClientOptions } from './grpc/client.js';
import type { LocalTransport } from './grpc/local.js';
import { GrpcServer, type GrpcServerOptions } from './grpc/server.js';
import { openKv, type Kv } from './kv/index.js';
import type { Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { startOpsServer } from './ops-server.js';
import type { Stop } from './process.js';
import { hasOutbox, notifyOutboxWrites, startRelay } from './relay.js';

/** What every service gets from whoever starts it (its `main.ts`, or the all-in-one hub). */
export interface ServiceDeps {
  db: Db;
  kv: Kv;
  log: Logger;
  metrics: Metrics;
  /** `host:port` to bind; port 0 picks a free one. */
  listen: string;
  internalToken?: string;
  /** Default deadline of calls this service makes to others. */
  grpcTimeoutMs: number;
  /** Set in the all-in-one mode with HUB_TRANSPORT=inproc: calls between services skip the network. */
  local?: LocalTransport;
  /** The event log; with it, a service whose schema has an `outbox` table relays it there. */
  bus?: Bus;
  /** How often the outbox relay polls (OUTBOX_POLL_MS); each committed outbox write also wakes it. */
  outboxPollMs?: number;
  /** GRPC_MAX_CONNECTION_AGE_MS and its grace; the server's defaults when absent. */
  connectionAge?: Pick<GrpcServerOptions, 'maxConnectionAgeMs' | 'maxConnectionAgeGraceMs'>;
}

/** Options for the clients a service makes of other services, from its own deps. */
export function clientOptions(deps: Pick<ServiceDeps, 'grpcTimeoutMs' | 'metrics' | 'internalToken' | 'local'>): ClientOptions {
  return { defaultTimeoutMs: deps.grpcTimeoutMs, metrics: deps.metrics, internalToken: deps.internalToken, local: deps.local };
}

export interface RunningService {
  readonly name: string;
  /** `host:port` the gRPC server listens on. */
  readonly address: string;
  /** Stops serving (draining calls for up to `graceMs`); closes nothing it was given. */
  stop(graceMs?: number): Promise<void>;
}

/** Applies the service's migrations, starts its gRPC server, and marks it serving. */
export async function serveGrpc(
  name: string,
  deps: ServiceDeps,
  options: { schema: string; migrations: URL },
  register: (server: GrpcServer) => void,
): Promise<RunningService> {
  await migrate(deps.db, { schema: options.schema, dir: options.migrations, log: deps.log });
  const relayOutbox = deps.bus !== undefined && (await hasOutbox(deps.db));
  const server = new GrpcServer({ log: deps.log, metrics: deps.metrics, internalToken: deps.internalToken, ...deps.connectionAge });
  register(server);
  const host = deps.listen.slice(0, deps.listen.lastIndexOf(':'));
  const port = await server.listen(deps.listen);
  const address = `${host}:${port}`;
  deps.local?.register(address, server);
  deps.log.info({ address }, 'gRPC service listening');
  const relay =
    relayOutbox && deps.bus
      ? startRelay({ db: deps.db, bus: deps.bus, log: deps.log.child({ component: 'outbox-relay' }), pollMs: deps.outboxPollMs })
      : undefined;
  return {
    name,
    address,
    async stop(graceMs) {
      await server.shutdown(graceMs);
      // After the calls drained, so the batch in flight includes what they wrote if it can.
      await relay?.stop();
    },
  };
}

/**
 * The one place a service's backends are chosen from configuration: PostgreSQL and Redis when
 * their URLs are set, else PGlite under `HUB_DATA_DIR/<service>` and an in-process Kv.
 */
export async function openBackends(config: HubConfig, service: string, options: { kv?: Kv } = {}): Promise<{ db: Db; kv: Kv }> {
  const opened = await openDb({
    url: config.DATABASE_URL,
    dataDir: config.DATABASE_URL ? undefined : join(config.HUB_DATA_DIR, service, 'pgdata'),
    schema: service,
    maxConnections: config.DATABASE_POOL_SIZE,
  });
  // Each committed outbox write wakes the service's relay (serveGrpc), so events leave at once.
  const db = notifyOutboxWrites(opened);
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
  const metrics = new Metrics({ defaultMetrics: config.HUB_METRICS });
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
      internalToken: config.HUB_INTERNAL_TOKEN,
      bus,
      outboxPollMs: config.OUTBOX_POLL_MS,
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
    }).catch(async (err: unknown) => {
      await service.stop(0);
      throw err;
    });
    return async () => {
      ops.markStopping();
      await service.stop(config.HUB_SHUTDOWN_GRACE_MS);
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
