/**
 * The messaging service: tasks between agents, a durable delivery queue per recipient (claimed
 * with SKIP LOCKED, at-least-once with stable delivery ids, x-ttl expiry), inbox long-polls for
 * connected agents and blocking sends that hear transitions through Kv pub/sub.
 */
import { identityv1, messagingv1 } from '@agenthub/proto';
import { clientOptions, createClient, egressPolicy, serveGrpc, type Resolver, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import { reportBacklog } from './backlog.js';
import { messagingEnv, type MessagingLimits } from './env.js';
import { startSweeper } from './inbox.js';
import { startPushWorker, type PushOptions } from './push.js';
import { createMessagingHandlers } from './server.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { messagingOptions } from './options.js';
/** The MessagingService handlers. */
export { createMessagingHandlers } from './server.js';
/** The environment the handlers, the sweeper and the push worker share: stores, identity, Kv, limits, quota overrides, clock. */
export { messagingEnv } from './env.js';
/** x-ttl expiry: fails still-submitted tasks whose deliveries expired and drops expired deliveries of tasks that moved on. */
export { sweepExpired, startSweeper } from './inbox.js';
/** Blocking, online and claim windows: a polled delivery not acknowledged within claimMs is handed out again (at least once, stable delivery id). */
export { DEFAULT_LIMITS, type MessagingLimits, type MessagingEnv, type IdentityClient } from './env.js';
/** The service's SQL, in its own schema, every method under the caller's signal. Tasks: task events keyed by task id so each task's transitions stay in order. */
export { TaskStore, MESSAGING_EVENTS_TOPIC } from './task-store.js';
/** Recipients' queues: a claimed delivery is hidden until its claim window ends, then handed out again (at least once). */
export { DeliveryStore } from './delivery-store.js';
/** Push agents (one worker at a time per agent, by lease; claimed in fair shares between tenants) and the agents' tasks behind hub tasks. */
export { PushStore } from './push-store.js';
/**
 * Deliveries to agents with an A2A endpoint, through the egress guard with backoff, several per
 * agent at once (a task's one at a time, in order) in slots shared fairly between tenants;
 * stopping aborts calls in flight and leaves their deliveries queued.
 */
export { startPushWorker, DEFAULT_PUSH_OPTIONS, type PushOptions } from './push.js';
/** The push secret of an agent, looked up for every delivery so a rotation applies to the next one. */
export type { PushCredentials } from './push-calls.js';

export interface MessagingDeps extends ServiceDeps {
  /** `host:port` of the identity service (recipients, output modes, grants). */
  identityAddr: string;
  limits?: Partial<MessagingLimits>;
  /** How often expired deliveries are swept; default 5 s. */
  sweepIntervalMs?: number;
  /** Epoch milliseconds; tests inject a clock. */
  now?: () => number;
  /** The push worker (deliveries to agents with an A2A endpoint); defaults in DEFAULT_PUSH_OPTIONS. */
  push?: Partial<PushOptions>;
  /**
   * The egress guard's policy for calls to push agents: HUB_EGRESS_ALLOW_PRIVATE (default false:
   * global unicast addresses only) and the resolver (the system's by default; tests inject one).
   */
  egress?: { allowPrivate: boolean; resolve?: Resolver };
}

/** Migrates the `messaging` schema, serves MessagingService and runs the expiry sweeper and the push worker. */
export async function startMessaging(deps: MessagingDeps): Promise<RunningService> {
  const identity = createClient(identityv1.IdentityService, deps.identityAddr, clientOptions(deps));
  const env = messagingEnv({ db: deps.db, kv: deps.kv, identity, limits: deps.limits, now: deps.now });
  try {
    const running = await serveGrpc(
      'messaging',
      deps,
      { schema: 'messaging', migrations: new URL('../migrations/', import.meta.url) },
      (server) => server.add(messagingv1.MessagingService, createMessagingHandlers(env)),
    );
    const stopSweeper = startSweeper(env, deps.log, deps.sweepIntervalMs ?? 5_000);
    const stopPush = startPushWorker(env, {
      log: deps.log.child({ component: 'push' }),
      metrics: deps.metrics,
      policy: egressPolicy(deps.egress?.allowPrivate ?? false, deps.egress?.resolve),
      // The push worker acts for no agent: it asks as the operator, the only principal allowed.
      credentials: async (agentId, signal) => (await identity.getPushCredential({ agentId }, { principal: { kind: 'operator' }, signal })).pushSecret,
      options: deps.push,
    });
    const stopBacklog = reportBacklog(deps.metrics, deps.db, env);
    return {
      name: running.name,
      address: running.address,
      async stop(graceMs) {
        stopBacklog();
        await stopSweeper();
        await stopPush();
        await running.stop(graceMs);
        identity.close();
      },
    };
  } catch (err) {
    identity.close();
    throw err;
  }
}
