import { Counter, Histogram } from 'prom-client';
import type { Db, EgressPolicy, Logger, Metrics } from '@agenthub/runtime';
import type { CreatorAccess, WorkspaceClient } from './access.js';
import type { WebhookSender } from './send.js';
import type { DeliveryStore } from './delivery-store.js';
import type { WebhookStore } from './webhook-store.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export interface EventsLimits {
  /** Most webhooks one workspace holds. */
  maxWebhooksPerWorkspace: number;
  /**
   * Delays before each retry after a failed attempt (the first attempt is at once); when they
   * are used up the delivery is failed (and replayable).
   */
  retryScheduleMs: number[];
  /** Longest Retry-After honoured; a longer one waits this long. */
  maxRetryAfterMs: number;
  /** An endpoint whose attempts failed continuously this long is disabled. */
  disableAfterMs: number;
  /** How long the previous secret keeps signing after a rotation. */
  secretRotationWindowMs: number;
  /**
   * Finished deliveries (delivered or failed) and their attempts stay this long for
   * `webhooks.deliveries` and `webhooks.replay`, then are pruned, so the table does not grow forever.
   */
  historyMs: number;
  /**
   * How long a replica trusts that a webhook's creator still has admin access before asking the
   * workspace service again (each attempt needs it); a refusal is never remembered.
   */
  creatorAccessCacheMs: number;
}

export const DEFAULT_LIMITS: EventsLimits = {
  maxWebhooksPerWorkspace: 20,
  retryScheduleMs: [0, 5_000, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR],
  maxRetryAfterMs: 10 * HOUR,
  disableAfterMs: 5 * 24 * HOUR,
  secretRotationWindowMs: 24 * HOUR,
  historyMs: 30 * 24 * HOUR,
  creatorAccessCacheMs: 1_000,
};

/** Milliseconds since the epoch; tests move it by hand. */
export type Clock = () => number;

/** Delivery metrics, registered in the process's registry. */
export class WebhookMetrics {
  readonly deliveries: Counter<'outcome'>;
  readonly attemptSeconds: Histogram<'result'>;

  constructor(metrics: Metrics) {
    // A service restarted on the same registry (tests) reuses the metrics it registered before.
    const existing = (name: string) => metrics.registry.getSingleMetric(name);
    this.deliveries = (existing('agenthub_webhook_deliveries_total') as Counter<'outcome'> | undefined) ?? new Counter({
      name: 'agenthub_webhook_deliveries_total',
      help: 'Webhook delivery attempts by what came of them: delivered, retry (scheduled again), failed (schedule used up), disabled (endpoint disabled), test.',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
    this.attemptSeconds = (existing('agenthub_webhook_attempt_seconds') as Histogram<'result'> | undefined) ?? new Histogram({
      name: 'agenthub_webhook_attempt_seconds',
      help: 'Time from sending a webhook request to its response headers (or failure), by result (success, failure).',
      labelNames: ['result'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [metrics.registry],
    });
  }
}

/** What the domain modules work with. */
export interface EventsEnv {
  webhooks: WebhookStore;
  deliveries: DeliveryStore;
  /** The service's database, for the task push configs' statements (task-push.ts). */
  db: Db;
  workspace: WorkspaceClient;
  /** Whether a webhook's creator may still have its deliveries sent. */
  creatorAccess: CreatorAccess;
  sender: WebhookSender;
  policy: EgressPolicy;
  limits: EventsLimits;
  clock: Clock;
  metrics: WebhookMetrics;
  log: Logger;
  /**
   * Tells the delivery worker that deliveries were queued for `webhookIds` (unknown: replayed),
   * whose slots count under `slotsOf` when it is known (the webhooks' workspace, '' agent-wide).
   */
  wake(webhookIds?: string[], slotsOf?: string): void;
}
