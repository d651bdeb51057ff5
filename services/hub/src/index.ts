import { gatewayOptions, startGateway } from '@agenthub/gateway';
import { InternalKey, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { logMetricsPlace } from './metrics-place.js';
import { startServices } from './services.js';

/** The operator token in `<HUB_DATA_DIR>/admin-token` (mode 0600): made once on first start, then read; readAdminToken gives undefined when there is none. */
export { loadOrCreateAdminToken, readAdminToken } from './admin-token.js';
export { startServices, type RunningServices } from './services.js';
export { hubProcesses, startHubInTwoProcesses, usableCores } from './two-processes.js';

export interface RunningHub {
  /** Base URL of the gateway. */
  readonly url: string;
  readonly adminToken: string;
  /** gRPC address of each service, by proto service name (for probes and contract tests). */
  readonly services: Readonly<Record<string, string>>;
  stop: Stop;
}

/**
 * The whole hub in one process: the services (startServices) and the gateway on
 * HUB_HOST:HUB_PORT.
 */
export async function startHub(config: HubConfig, log: Logger): Promise<RunningHub> {
  const internalKey = InternalKey.generate();
  const services = await startServices(config, log, internalKey);
  try {
    const { upstreams, metrics, kv, local, adminToken } = services;
    const gateway = await startGateway({
      log: log.child({ service: 'gateway' }),
      metrics,
      kv,
      upstreams,
      local,
      adminToken,
      // One process: the key cache whatever REDIS_URL says, metrics on the public port only when
      // HUB_HOST is loopback, else on OPS_HOST:OPS_PORT (see gatewayOptions).
      ...gatewayOptions(config, { oneProcess: true }),
      internalKey,
    });
    logMetricsPlace(gateway, log);
    const stop: Stop = async () => {
      await gateway.stop(config.HUB_SHUTDOWN_GRACE_MS);
      await services.stop();
    };
    return { url: gateway.url, adminToken, services: services.services, stop };
  } catch (err) {
    await services.stop().catch(() => undefined);
    throw err;
  }
}
