import type { identityv1 } from '@agenthub/proto';
import type { Client, Db, Kv } from '@agenthub/runtime';
import { Recipients } from './recipients.js';
import { MessagingStore } from './store.js';
import { InboxWakes } from './wake.js';

/** The part of the identity service this one calls. */
export type IdentityClient = Pick<Client<typeof identityv1.IdentityService.method>, 'getAgent' | 'checkGrant'>;

export interface MessagingLimits {
  /** Quota: tasks one agent has sent that are still submitted or working (HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER; Infinity: none). */
  maxTasksInFlightPerSender: number;
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
  maxTaskBytes: 4 * 1024 * 1024,
  idempotencyWindowMs: 24 * 3600_000,
};

/** What the handlers, the sweeper and the push worker work with. */
export interface MessagingEnv {
  store: MessagingStore;
  identity: IdentityClient;
  recipients: Recipients;
  kv: Kv;
  /** Wakes recipients' inbox long-polls (and push workers) after a send. */
  wakes: InboxWakes;
  limits: MessagingLimits;
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
  return {
    store: new MessagingStore(deps.db),
    identity: deps.identity,
    recipients: new Recipients(deps.identity),
    kv: deps.kv,
    wakes: new InboxWakes(deps.kv, inboxChannel),
    limits: { ...DEFAULT_LIMITS, ...deps.limits },
    now: deps.now ?? Date.now,
  };
}
