/**
 * The events service: webhook subscriptions of workspaces, and the delivery of workspace events
 * to them (Standard Webhooks signatures, a retry schedule, every attempt recorded, replay).
 * Events come from the event log as consumer group `agenthub-events`; deliveries are rows
 * claimed with FOR UPDATE SKIP LOCKED, so any number of replicas share the work.
 */
import { eventsv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, egressPolicy, serveGrpc, WORKSPACE_EVENTS_TOPIC, type Bus, type Resolver, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import { CreatorAccess } from './access.js';
import { reportBacklog } from './backlog.js';
import { DeliveryWorker, intakeEvent } from './deliveries.js';
import { DEFAULT_LIMITS, WebhookMetrics, type Clock, type EventsEnv, type EventsLimits } from './env.js';
import { WebhookSender } from './send.js';
import { createEventsHandlers } from './server.js';
import { DeliveryStore } from './delivery-store.js';
import { WebhookStore } from './webhook-store.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { eventsOptions } from './options.js';
/** The EventsService handlers; every one checks the caller's admin role on the workspace first. */
export { createEventsHandlers } from './server.js';
/** Webhook limits and the retry schedule: retries in this order, then the delivery fails (replayable); finished deliveries pruned after historyMs. */
export { DEFAULT_LIMITS, type EventsLimits, type Clock } from './env.js';
/** Webhook signatures: HMAC-SHA256 over `<id>.<timestamp>.<body>`; during a rotation one signature per live secret, space-separated. */
export { sign, webhookHeaders } from './signing.js';
/** The workspace event types of the interface; a webhook filter may name only these. */
export { EVENT_TYPES } from './validate.js';

/** The messaging service's topic (its store names it too): task transitions, keyed by task id. */
const MESSAGING_EVENTS_TOPIC = 'agenthub.messaging.events';

/** Consumer group of every events replica: each event reaches one of them. */
export const CONSUMER_GROUP = 'agenthub-events';

export interface EventsDeps extends ServiceDeps {
  /** `host:port` of the workspace service, asked for the caller's role on every call. */
  workspaceAddr: string;
  /** The event log workspace events are consumed from. */
  bus: Bus;
  /** HUB_EGRESS_ALLOW_PRIVATE: allow targets outside global unicast space (private, loopback, link-local, …). */
  allowPrivate: boolean;
  /** WEBHOOK_TIMEOUT_MS: bound of one delivery attempt. */
  timeoutMs: number;
  limits?: Partial<EventsLimits>;
  /** Host name resolution for the egress guard (checks and connections); the system resolver by default. */
  resolve?: Resolver;
  /** Time as the retry schedule sees it; `Date.now` by default. */
  clock?: Clock;
  worker?: {
    /** Longest sleep of the delivery loop when nothing wakes it (default 1000). */
    pollMs?: number;
    /** Heads claimed by one query (default 32). */
    batchSize?: number;
    /** Most webhooks delivered to at once, one delivery each (default 32). */
    concurrency?: number;
    /** Most deliveries of one webhook sent in a row before its queue goes back to the claim (default 20). */
    runLength?: number;
    /** Most slots the webhooks of one workspace hold at once (default a quarter of `concurrency`). */
    maxSlotsPerWorkspace?: number;
    /** False runs no loop: deliveries go out only on `deliverDue()` (tests). */
    enabled?: boolean;
  };
}

export interface RunningEvents extends RunningService {
  /** Sends every delivery due now (by the service's clock); resolves with the attempts made. */
  deliverDue(): Promise<number>;
}

/**
 * Migrates the `events` schema, serves EventsService, starts the delivery worker, and then
 * consumes workspace events. Stopping it stops consuming first, then the worker, then serving;
 * the database, Kv and bus it was given stay open.
 */
export async function startEvents(deps: EventsDeps): Promise<RunningEvents> {
  const workspace = createClient(workspacev1.WorkspaceService, deps.workspaceAddr, clientOptions(deps));
  const policy = egressPolicy(deps.allowPrivate, deps.resolve);
  const sender = new WebhookSender({ policy, timeoutMs: deps.timeoutMs });
  const log = deps.log;
  let worker: DeliveryWorker | undefined;
  const limits = { ...DEFAULT_LIMITS, ...deps.limits };
  const clock = deps.clock ?? Date.now;
  const env: EventsEnv = {
    webhooks: new WebhookStore(deps.db),
    deliveries: new DeliveryStore(deps.db),
    db: deps.db,
    workspace,
    creatorAccess: new CreatorAccess(workspace, limits.creatorAccessCacheMs, clock),
    sender,
    policy,
    limits,
    clock,
    metrics: new WebhookMetrics(deps.metrics),
    log,
    wake: (webhookIds, slotsOf) => worker?.wake(webhookIds, slotsOf),
  };
  const timeoutMs = deps.timeoutMs;
  worker = new DeliveryWorker(env, {
    pollMs: deps.worker?.pollMs ?? 1000,
    batchSize: deps.worker?.batchSize ?? 32,
    concurrency: deps.worker?.concurrency ?? 32,
    runLength: deps.worker?.runLength ?? 20,
    maxSlotsPerWorkspace: deps.worker?.maxSlotsPerWorkspace ?? Math.max(1, Math.floor((deps.worker?.concurrency ?? 32) / 4)),
    // Outlives any attempt, so a live worker's claim never lapses under it.
    leaseMs: timeoutMs + 30_000,
  });
  const closeAll = () => {
    sender.close();
    workspace.close();
  };
  let running: RunningService | undefined;
  try {
    // No outbox table in this schema, so serveGrpc starts no relay: this service only consumes.
    running = await serveGrpc(
      'events',
      deps,
      { schema: 'events', migrations: new URL('../migrations/', import.meta.url) },
      (server) => server.add(eventsv1.EventsService, createEventsHandlers(env)),
    );
    if (deps.worker?.enabled !== false) worker.start();
    // Task events feed task push notification configs (task-push.ts).
    const topics = [WORKSPACE_EVENTS_TOPIC, MESSAGING_EVENTS_TOPIC];
    const subscription = await deps.bus.subscribe(CONSUMER_GROUP, topics, (message) => intakeEvent(env, message));
    const stopBacklog = reportBacklog(deps.metrics, deps.db, deps.bus, { group: CONSUMER_GROUP, topics }, env.limits.maxWebhooksPerWorkspace);
    const service = running;
    return {
      name: service.name,
      address: service.address,
      deliverDue: () => worker.deliverDue(),
      async stop(graceMs) {
        stopBacklog();
        // The gRPC server stops taking calls at once, as readiness already says: the event being
        // taken in and the deliveries in flight finish alongside the calls, not before them.
        await Promise.all([service.stop(graceMs), subscription.stop().then(() => worker.stop())]);
        closeAll();
      },
    };
  } catch (err) {
    await worker.stop();
    await running?.stop(0);
    closeAll();
    throw err;
  }
}
