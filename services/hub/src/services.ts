import type { UpstreamAddresses } from '@agenthub/gateway';
import { identityOptions, startIdentity } from '@agenthub/identity';
import { eventsv1, identityv1, messagingv1, secretsv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, EmbeddedCluster, ensurePrivateDir, LocalTransport, Metrics, openBackends, openBus, openKv, type ClientOf, type HubConfig, type InternalKey, type Kv, type Logger, type Stop } from '@agenthub/runtime';
import { destroySecretsWith, startWorkspace, workspaceOptions } from '@agenthub/workspace';
import { secretsOptions, startSecrets } from '@agenthub/secrets';
import { messagingOptions, startMessaging } from '@agenthub/messaging';
import { eventsOptions, startEvents } from '@agenthub/events';
import { loadOrCreateAdminToken } from './admin-token.js';

/** The hub's services, started in this process: what a gateway needs to call them. */
export interface RunningServices {
  /** gRPC address of each service, by the gateway's name for it. */
  readonly upstreams: UpstreamAddresses;
  /** gRPC address of each service, by proto service name (for probes and contract tests). */
  readonly services: Readonly<Record<string, string>>;
  readonly adminToken: string;
  readonly metrics: Metrics;
  readonly kv: Kv;
  /** Set with HUB_TRANSPORT=inproc: a gateway in this process calls the handlers directly. */
  readonly local: LocalTransport | undefined;
  stop: Stop;
}

/**
 * Every service of the hub in this process, each on its own loopback gRPC port (so the embedded
 * mode runs the same gRPC path as production). Backends follow the configuration:
 * PostgreSQL/Redis when their URLs are set, PGlite/in-process else.
 *
 * Only this hub's gateway calls them, so they bind 127.0.0.1 whatever GRPC_HOST says (it is a
 * split-mode setting), and every call is signed with `internalKey`, made at start and never
 * written anywhere (HUB_INTERNAL_KEY, GRPC_TLS_* are for split mode and not used here).
 *
 * Each service's settings come from its own `<service>Options(config)`, the mapping its split
 * `main.ts` uses too; this function only adds what the process shares (Kv, bus, local transport,
 * internal key, metrics, loopback listen) and the addresses of the services it started.
 */
export async function startServices(config: HubConfig, log: Logger, internalKey: InternalKey): Promise<RunningServices> {
  const metrics = Metrics.fromConfig(config);
  const kv = await openKv({ url: config.REDIS_URL, prefix: config.REDIS_PREFIX });
  const stops: Stop[] = [() => kv.close()];
  const stopAll: Stop = async () => {
    for (const stop of [...stops].reverse()) await stop();
  };
  try {
    await ensurePrivateDir(config.HUB_DATA_DIR, log);
    const listen = '127.0.0.1:0';
    // Every service still listens on gRPC (probes, contract tests); with inproc, calls between
    // them in this process skip the loopback network.
    const local = config.HUB_TRANSPORT === 'inproc' ? new LocalTransport() : undefined;
    // One event log for the process: every service's outbox relay publishes to it, the events
    // service consumes it. Closed after every service stopped.
    const bus = await openBus(config, log, { kv });
    stops.push(() => bus.close());
    const common = { kv, metrics, listen, grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS, internalKey, local, bus, outboxPollMs: config.OUTBOX_POLL_MS, outboxPassIntervalMs: config.OUTBOX_PASS_INTERVAL_MS };
    // In memory, the services share one embedded cluster, a schema each, as they share one
    // PostgreSQL database; the bus keeps its own, as a relay holds its service's transaction
    // while it publishes. Closed after every service's handle.
    const cluster = !config.DATABASE_URL && config.HUB_EMBEDDED_STORAGE === 'memory' ? await EmbeddedCluster.create() : undefined;
    if (cluster) stops.push(() => cluster.close());
    const backends = { kv, cluster };

    const identityDb = (await openBackends(config, 'identity', backends)).db;
    stops.push(() => identityDb.close());
    const identity = await startIdentity({ ...common, db: identityDb, log: log.child({ service: 'identity' }), ...identityOptions(config) });
    stops.push(() => identity.stop(config.HUB_SHUTDOWN_GRACE_MS));

    let secretsClient: ClientOf<typeof secretsv1.SecretsService> | undefined;
    const workspaceDb = (await openBackends(config, 'workspace', backends)).db;
    stops.push(() => workspaceDb.close());
    const workspace = await startWorkspace({
      ...common,
      db: workspaceDb,
      log: log.child({ service: 'workspace' }),
      identityAddr: identity.address,
      ...workspaceOptions(config),
      afterDelete: destroySecretsWith(() => secretsClient),
    });
    stops.push(() => workspace.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const secretsDb = (await openBackends(config, 'secrets', backends)).db;
    stops.push(() => secretsDb.close());
    const secretsLog = log.child({ service: 'secrets' });
    const secrets = await startSecrets({
      ...common,
      db: secretsDb,
      log: secretsLog,
      workspaceAddr: workspace.address,
      // HUB_KEKS, else the embedded KEK file in HUB_DATA_DIR (generated on first start, with a warning).
      ...(await secretsOptions(config, secretsLog, { oneProcess: true })),
    });
    stops.push(() => secrets.stop(config.HUB_SHUTDOWN_GRACE_MS));
    secretsClient = createClient(secretsv1.SecretsService, secrets.address, clientOptions(common));
    stops.push(async () => secretsClient?.close());

    const messagingDb = (await openBackends(config, 'messaging', backends)).db;
    stops.push(() => messagingDb.close());
    const messaging = await startMessaging({
      ...common,
      db: messagingDb,
      log: log.child({ service: 'messaging' }),
      identityAddr: identity.address,
      ...messagingOptions(config),
    });
    stops.push(() => messaging.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const eventsDb = (await openBackends(config, 'events', backends)).db;
    stops.push(() => eventsDb.close());
    const events = await startEvents({
      ...common,
      db: eventsDb,
      log: log.child({ service: 'events' }),
      workspaceAddr: workspace.address,
      ...eventsOptions(config),
    });
    stops.push(() => events.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const adminToken = config.HUB_ADMIN_TOKEN ?? (await loadOrCreateAdminToken(config.HUB_DATA_DIR, log)).token;
    const services = {
      [identityv1.IdentityService.typeName]: identity.address,
      [workspacev1.WorkspaceService.typeName]: workspace.address,
      [secretsv1.SecretsService.typeName]: secrets.address,
      [messagingv1.MessagingService.typeName]: messaging.address,
      [eventsv1.EventsService.typeName]: events.address,
    };
    const upstreams = { identity: identity.address, workspace: workspace.address, secrets: secrets.address, messaging: messaging.address, events: events.address };
    return { upstreams, services, adminToken, metrics, kv, local, stop: stopAll };
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
}
