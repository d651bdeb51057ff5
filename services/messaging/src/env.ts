import type { identityv1 } from '@agenthub/proto';
import { LocalFirstKv, QuotaOverrides, type Client, type Db, type Kv } from '@agenthub/runtime';
import { DeliveryStore } from './delivery-store.js';
import { InboxRoom } from './inbox-room.js';
import { SettledHandoff } from './lifecycle.js';
import { PushStore } from './push-store.js';
import { Recipients } from './recipients.js';
import { SendKeyStore } from './send-key-store.js';
import { TaskStore } from './task-store.js';
import { InboxWakes } from './wake.js';

/** The part of the identity service this one calls. */
export type IdentityClient = Pick<Client<typeof identityv1.IdentityService.method>, 'getAgent' | 'checkGrant' | 'getTenantLimits'>;

export interface MessagingLimits {
  /** Quota: tasks one agent has sent that are still submitted or working (HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER; Infinity: none). */
  maxTasksInFlightPerSender: number;
  /** Quota: deliveries waiting in one agent's inbox (HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT, overridable per tenant; Infinity: none). */
  maxQueuedDeliveriesPerAgent: number;
  /** Longest SendMessage blocking wait (the interface's 60 s). */
  blockingMs: number;
  /** A connected agent counts as online this long after its last inbox poll. */
  onlineMs: number;
  /** Longest inbox long-poll wait. */
  maxPollWaitMs: number;
  /** How long a polled, unacknowledged delivery stays hidden before it is handed out again. */
  claimMs: number;
  /** x-ttl when the sender gives none: 30 days. */
  defaultTtlSeconds: number;
  /** Messages and parts per message. */
  maxParts: number;
  /**
   * Messages, and artifacts, one task may hold: an endless conversation on one task would make
   * every full read of it slower. Continue in a new task instead.
   */
  maxTaskItems: number;
  /**
   * Serialized bytes of all the messages and artifacts of one task (MESSAGING_TASK_MAX_BYTES):
   * GetTask returns them in one gRPC message, so this stays well under its 8 MiB bound.
   */
  maxTaskBytes: number;
  /** How long a repeated (sender, messageId) is the same send rather than a new one: 24 h. */
  idempotencyWindowMs: number;
}

export const DEFAULT_LIMITS: MessagingLimits = {
  blockingMs: 60_000,
  onlineMs: 60_000,
  maxPollWaitMs: 30_000,
  claimMs: 30_000,
  defaultTtlSeconds: 30 * 24 * 3600,
  maxParts: 100,
  maxTaskItems: 1000,
  maxTasksInFlightPerSender: 1000,
  maxQueuedDeliveriesPerAgent: 10_000,
  maxTaskBytes: 4 * 1024 * 1024,
  idempotencyWindowMs: 24 * 3600_000,
};

/** What the handlers, the sweeper and the push worker work with. */
export interface MessagingEnv {
  tasks: TaskStore;
  deliveries: DeliveryStore;
  pushes: PushStore;
  sendKeys: SendKeyStore;
  identity: IdentityClient;
  recipients: Recipients;
  kv: Kv;
  /** Wakes recipients' inbox long-polls (and push workers) after a send. */
  wakes: InboxWakes;
  /** Settled tasks handed to the blocking sends of this process that wait on them. */
  settled: SettledHandoff;
  limits: MessagingLimits;
  /** Tenants' overrides of the quotas set per tenant (`queued_deliveries_per_agent`). */
  overrides: QuotaOverrides;
  inboxRoom: InboxRoom;
  /** Epoch milliseconds; injectable so tests move time without sleeping. */
  now: () => number;
}

/** Kv channel waking long-polls of an agent's inbox. */
export const inboxChannel = (agentId: string) => `messaging:inbox:${agentId}`;
/** Kv key present while the agent has polled within `onlineMs`. */
export const onlineKey = (agentId: string) => `messaging:online:${agentId}`;

/** The environment the handlers, the sweeper and the push worker share. */
export function messagingEnv(deps: {
  db: Db;
  kv: Kv;
  identity: IdentityClient;
  limits?: Partial<MessagingLimits>;
  now?: () => number;
}): MessagingEnv {
  // A blocking send and the inbox it wakes usually share a messaging process: the wake-ups on its
  // path (send → inbox, update → waiting sender) skip two hops through the Kv.
  const kv = new LocalFirstKv(deps.kv);
  const deliveries = new DeliveryStore(deps.db);
  const limits = { ...DEFAULT_LIMITS, ...deps.limits };
  return {
    tasks: new TaskStore(deps.db, limits.idempotencyWindowMs),
    deliveries,
    pushes: new PushStore(deps.db),
    sendKeys: new SendKeyStore(deps.db, limits.idempotencyWindowMs),
    inboxRoom: new InboxRoom(deliveries),
    identity: deps.identity,
    recipients: new Recipients(deps.identity),
    kv,
    wakes: new InboxWakes(kv, inboxChannel),
    settled: new SettledHandoff(),
    limits,
    overrides: new QuotaOverrides(async (tenantId, signal) => (await deps.identity.getTenantLimits({ tenantId }, { principal: { kind: 'operator' }, signal })).limits?.quotas ?? {}),
    now: deps.now ?? Date.now,
  };
}
