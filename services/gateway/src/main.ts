import { ConfigError, Metrics, openKv, splitSecurity, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startGateway } from './index.js';
import { gatewayOptions } from './options.js';

/**
 * The gateway as its own process (split mode): HTTP on HUB_HOST:HUB_PORT, forwarding to
 * IDENTITY_ADDR, WORKSPACE_ADDR, SECRETS_ADDR, MESSAGING_ADDR and EVENTS_ADDR. The operator token must be given (HUB_ADMIN_TOKEN): a
 * replicated gateway has no data directory of its own to keep a generated one in.
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const missing = (['IDENTITY_ADDR', 'WORKSPACE_ADDR', 'SECRETS_ADDR', 'MESSAGING_ADDR', 'EVENTS_ADDR', 'HUB_ADMIN_TOKEN'] as const).filter((name) => !config[name]);
  if (missing.length) throw new ConfigError(`The gateway needs ${missing.join(', ')} in split mode`);
  const { internalKey, tls } = await splitSecurity(config);
  const metrics = Metrics.fromConfig(config);
  const kv = await openKv({ url: config.REDIS_URL, prefix: config.REDIS_PREFIX });
  const gateway = await startGateway({
    log,
    metrics,
    kv,
    upstreams: { identity: config.IDENTITY_ADDR!, workspace: config.WORKSPACE_ADDR!, secrets: config.SECRETS_ADDR!, messaging: config.MESSAGING_ADDR!, events: config.EVENTS_ADDR! },
    adminToken: config.HUB_ADMIN_TOKEN!,
    // Split mode: the key cache only with Redis, metrics on the ops port (see gatewayOptions).
    ...gatewayOptions(config, { oneProcess: false }),
    internalKey,
    tls,
  });
  log.info({ url: gateway.url, metrics: gateway.metricsUrl }, 'gateway listening');
  if (!config.HUB_PUBLIC_URL) {
    log.warn('No HUB_PUBLIC_URL: Agent Cards take their links from each request (docs/security.md); set it to the URL clients reach the hub at');
  }
  return async () => {
    await gateway.stop(config.HUB_SHUTDOWN_GRACE_MS);
    await kv.close();
  };
}
