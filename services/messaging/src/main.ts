import { ConfigError, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startMessaging } from './index.js';
import { messagingOptions } from './options.js';

/**
 * The messaging service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. Needs
 * IDENTITY_ADDR; replicas share DATABASE_URL and REDIS_URL (queue claims and blocking waits work
 * across them).
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const identityAddr = config.IDENTITY_ADDR;
  if (!identityAddr) throw new ConfigError('The messaging service needs IDENTITY_ADDR in split mode');
  return serviceProcess(config, log, 'messaging', (deps) =>
    startMessaging({ ...deps, identityAddr, ...messagingOptions(config) }),
    { bus: true },
  );
}
