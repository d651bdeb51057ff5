import { egressAllowPrivate, type HubConfig } from '@agenthub/runtime';
import type { MessagingDeps } from './index.js';

/**
 * The messaging service's settings from configuration (MESSAGING_*, HUB_EGRESS_ALLOW_PRIVATE):
 * the one mapping, used by its `main.ts` and by the all-in-one hub, so both modes run it alike.
 */
export function messagingOptions(config: HubConfig): Pick<MessagingDeps, 'limits' | 'sweepIntervalMs' | 'push' | 'egress'> {
  return {
    limits: {
      blockingMs: config.MESSAGING_BLOCKING_MS,
      onlineMs: config.MESSAGING_ONLINE_MS,
      claimMs: config.MESSAGING_CLAIM_MS,
      maxTaskBytes: config.MESSAGING_TASK_MAX_BYTES,
      idempotencyWindowMs: config.MESSAGING_IDEMPOTENCY_WINDOW_MS,
      maxTasksInFlightPerSender: config.HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER || Infinity,
      maxQueuedDeliveriesPerAgent: config.HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT || Infinity,
    },
    sweepIntervalMs: config.MESSAGING_SWEEP_MS,
    push: {
      maxBackoffMs: config.MESSAGING_PUSH_MAX_BACKOFF_MS,
      timeoutMs: config.MESSAGING_PUSH_TIMEOUT_MS,
      maxResponseBytes: config.MESSAGING_PUSH_MAX_RESPONSE_BYTES,
      concurrency: config.MESSAGING_PUSH_CONCURRENCY,
      perAgent: config.MESSAGING_PUSH_CONCURRENCY_PER_AGENT,
    },
    egress: { allowPrivate: egressAllowPrivate(config) },
  };
}
