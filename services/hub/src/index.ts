import { limitsConfig, requestLogLevel, startGateway } from '@agenthub/gateway';
import { startIdentity } from '@agenthub/identity';
import { eventsv1, identityv1, messagingv1, secretsv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, egressAllowPrivate, ensurePrivateDir, InternalKey, LocalTransport, Metrics, openBackends, openBus, openKv, type ClientOf, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { destroySecretsWith, startWorkspace, workspaceQuotas } from '@agenthub/workspace';
import { loadKeyWrapper, startSecrets } from '@agenthub/secrets';
import { startMessaging } from '@agenthub/messaging';
import { startEvents } from '@agenthub/events';
import { loadOrCreateAdminToken } from './admin-token.js';

export { loadOrCreateAdminToken, readAdminToken } from './admin-token.js';

export interface RunningHub {
  /** Base URL of the gateway. */
  readonly url: string;
  readonly adminToken: string;
  /** gRPC address of each service, by proto service name (for probes and contract tests). */
  readonly services: Readonly<Record<string, string>>;
  stop: Stop;
}

/**
 * The whole hub in one process: every service on its own loopback gRPC port (so the embedded
 * mode runs the same gRPC path as production) and the gateway on HUB_HOST:HUB_PORT. Backends
 * follow the configuration: PostgreSQL/Redis when their URLs are set, PGlite/in-process else.
 *
 * Only this process calls its services, so they bind 127.0.0.1 whatever GRPC_HOST says (it is a
 * split-mode setting), and every call is signed with a key made at start that never leaves the
 * process (HUB_INTERNAL_KEY, GRPC_TLS_* are for split mode and not used here).
 */
export async function startHub(config: HubConfig, log: Logger): Promise<RunningHub> {
  const metrics = new Metrics({ defaultMetrics: config.HUB_METRICS });
  const kv = await openKv({ url: config.REDIS_URL, prefix: config.REDIS_PREFIX });
  const stops: Stop[] = [() => kv.close()];
  const stopAll: Stop = async () => {
    for (const stop of [...stops].reverse()) await stop();
  };
  try {
    await ensurePrivateDir(config.HUB_DATA_DIR, log);
    const listen = '127.0.0.1:0';
    const internalKey = InternalKey.generate();
    // Every service still listens on gRPC (probes, contract tests); with inproc, calls between
    // them in this process skip the loopback network.
    const local = config.HUB_TRANSPORT === 'inproc' ? new LocalTransport() : undefined;
    // One event log for the process: every service's outbox relay publishes to it, the events
    // service consumes it. Closed after every service stopped.
    const bus = await openBus(config, log, { kv });
    stops.push(() => bus.close());
    const common = { kv, metrics, listen, grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS, internalKey, local, bus, outboxPollMs: config.OUTBOX_POLL_MS };

    const identityDb = (await openBackends(config, 'identity', { kv })).db;
    stops.push(() => identityDb.close());
    const identity = await startIdentity({ ...common, db: identityDb, log: log.child({ service: 'identity' }), egress: { allowPrivate: egressAllowPrivate(config) } });
    stops.push(() => identity.stop(config.HUB_SHUTDOWN_GRACE_MS));

    let secretsClient: ClientOf<typeof secretsv1.SecretsService> | undefined;
    const workspaceDb = (await openBackends(config, 'workspace', { kv })).db;
    stops.push(() => workspaceDb.close());
    const workspace = await startWorkspace({
      ...common,
      db: workspaceDb,
      log: log.child({ service: 'workspace' }),
      identityAddr: identity.address,
      memory: config,
      quotas: workspaceQuotas(config),
      afterDelete: destroySecretsWith(() => secretsClient),
    });
    stops.push(() => workspace.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const secretsDb = (await openBackends(config, 'secrets', { kv })).db;
    stops.push(() => secretsDb.close());
    const secretsLog = log.child({ service: 'secrets' });
    const secrets = await startSecrets({
      ...common,
      db: secretsDb,
      log: secretsLog,
      workspaceAddr: workspace.address,
      // HUB_KEKS, else the embedded KEK file in HUB_DATA_DIR (generated on first start, with a warning).
      keyWrapper: await loadKeyWrapper({ keks: config.HUB_KEKS, dataDir: config.HUB_DATA_DIR, generate: true, log: secretsLog }),
    });
    stops.push(() => secrets.stop(config.HUB_SHUTDOWN_GRACE_MS));
    secretsClient = createClient(secretsv1.SecretsService, secrets.address, clientOptions(common));
    stops.push(async () => secretsClient?.close());

    const messagingDb = (await openBackends(config, 'messaging', { kv })).db;
    stops.push(() => messagingDb.close());
    const messaging = await startMessaging({
      ...common,
      db: messagingDb,
      log: log.child({ service: 'messaging' }),
      identityAddr: identity.address,
      limits: {
        blockingMs: config.MESSAGING_BLOCKING_MS,
        onlineMs: config.MESSAGING_ONLINE_MS,
        claimMs: config.MESSAGING_CLAIM_MS,
        maxTaskBytes: config.MESSAGING_TASK_MAX_BYTES,
        maxTasksInFlightPerSender: config.HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER,
      },
      sweepIntervalMs: config.MESSAGING_SWEEP_MS,
      push: {
        maxBackoffMs: config.MESSAGING_PUSH_MAX_BACKOFF_MS,
        timeoutMs: config.MESSAGING_PUSH_TIMEOUT_MS,
        maxResponseBytes: config.MESSAGING_PUSH_MAX_RESPONSE_BYTES,
      },
      egress: { allowPrivate: egressAllowPrivate(config) },
    });
    stops.push(() => messaging.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const eventsDb = (await openBackends(config, 'events', { kv })).db;
    stops.push(() => eventsDb.close());
    const events = await startEvents({
      ...common,
      db: eventsDb,
      log: log.child({ service: 'events' }),
      workspaceAddr: workspace.address,
      allowPrivate: egressAllowPrivate(config),
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      limits: {
        historyMs: config.WEBHOOK_HISTORY_DAYS * 24 * 3_600_000,
        ...(config.WEBHOOK_RETRY_SCHEDULE_MS ? { retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS } : {}),
      },
    });
    stops.push(() => events.stop(config.HUB_SHUTDOWN_GRACE_MS));

    const adminToken = config.HUB_ADMIN_TOKEN ?? (await loadOrCreateAdminToken(config.HUB_DATA_DIR, log)).token;
    const gateway = await startGateway({
      log: log.child({ service: 'gateway' }),
      metrics,
      kv,
      upstreams: { identity: identity.address, workspace: workspace.address, secrets: secrets.address, messaging: messaging.address, events: events.address },
      local,
      adminToken,
      host: config.HUB_HOST,
      port: config.HUB_PORT,
      maxBodyBytes: config.HUB_MAX_BODY_BYTES,
      maxBatch: config.HUB_MAX_BATCH,
      maxJsonDepth: config.HUB_MAX_JSON_DEPTH,
      publicUrl: config.HUB_PUBLIC_URL,
      trustedProxies: config.HUB_TRUSTED_PROXIES,
      authCacheMs: config.HUB_AUTH_CACHE_MS,
      grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS,
      internalKey,
      limits: limitsConfig(config),
      requestLogLevel: requestLogLevel(config.NODE_ENV),
    });
    stops.push(() => gateway.stop(config.HUB_SHUTDOWN_GRACE_MS));
    const services = {
      [identityv1.IdentityService.typeName]: identity.address,
      [workspacev1.WorkspaceService.typeName]: workspace.address,
      [secretsv1.SecretsService.typeName]: secrets.address,
      [messagingv1.MessagingService.typeName]: messaging.address,
      [eventsv1.EventsService.typeName]: events.address,
    };
    return { url: gateway.url, adminToken, services, stop: stopAll };
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
}
