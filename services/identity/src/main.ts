import { serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startIdentity } from './index.js';
import { identityOptions } from './options.js';

/** The identity service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. */
export function main(config: HubConfig, log: Logger): Promise<Stop> {
  return serviceProcess(config, log, 'identity', (deps) => startIdentity({ ...deps, ...identityOptions(config) }));
}
