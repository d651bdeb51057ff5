import { egressAllowPrivate, type HubConfig } from '@agenthub/runtime';
import type { EventsDeps } from './index.js';

/**
 * The events service's settings from configuration (WEBHOOK_*, HUB_EGRESS_ALLOW_PRIVATE): the
 * one mapping, used by its `main.ts` and by the all-in-one hub, so both modes run it alike.
 */
export function eventsOptions(config: HubConfig): Pick<EventsDeps, 'allowPrivate' | 'timeoutMs' | 'limits'> {
  return {
    allowPrivate: egressAllowPrivate(config),
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    limits: {
      historyMs: config.WEBHOOK_HISTORY_DAYS * 24 * 3_600_000,
      ...(config.WEBHOOK_RETRY_SCHEDULE_MS ? { retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS } : {}),
    },
  };
}
