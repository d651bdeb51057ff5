import { ConfigError, Metrics, openBackends, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startWorkspace } from './index.js';

/** The workspace service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  if (!config.IDENTITY_ADDR) throw new ConfigError('The workspace service needs IDENTITY_ADDR in split mode');
  const metrics = new Metrics({ defaultMetrics: config.HUB_METRICS });
  const { db, kv } = await openBackends(config, 'workspace');
  const service = await startWorkspace({
    db,
    kv,
    log,
    metrics,
    listen: `${config.GRPC_HOST}:${config.GRPC_PORT}`,
    grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS,
    internalToken: config.HUB_INTERNAL_TOKEN,
    identityAddr: config.IDENTITY_ADDR,
  });
  return async () => {
    await service.stop(config.HUB_SHUTDOWN_GRACE_MS);
    await db.close();
    await kv.close();
  };
}
