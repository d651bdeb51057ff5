import type { Logger } from '@agenthub/runtime';

/** Where the hub serves `/metrics`, as one line of its start's log. */
export function logMetricsPlace(gateway: { url: string; metricsUrl: string | undefined }, log: Logger): void {
  log.info({ metrics: `${gateway.metricsUrl ?? gateway.url}/metrics` }, gateway.metricsUrl ? 'metrics served on the ops port (OPS_HOST:OPS_PORT), not on HUB_PORT' : 'metrics served on HUB_PORT (HUB_HOST is loopback)');
}
