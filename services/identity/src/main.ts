import { Metrics, openBackends, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startIdentity } from './index.js';

/** The identity service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const metrics = new Metrics({ defaultMetrics: config.HUB_METRICS });
  const { db, kv } = await openBackends(config, 'identity');
  const service = await startIdentity({
    db,
    kv,
    log,
    metrics,
    listen: `${config.GRPC_HOST}:${config.GRPC_PORT}`,
    grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS,
    internalToken: config.HUB_INTERNAL_TOKEN,
  });
  return async () => {
    await service.stop(config.HUB_SHUTDOWN_GRACE_MS);
    await db.close();
    await kv.close();
  };
}
