import { ConfigError, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startWorkspace } from './index.js';

/** The workspace service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const identityAddr = config.IDENTITY_ADDR;
  if (!identityAddr) throw new ConfigError('The workspace service needs IDENTITY_ADDR in split mode');
  return serviceProcess(config, log, 'workspace', (deps) => startWorkspace({ ...deps, identityAddr, memory: config }));
}
