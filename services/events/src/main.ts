import { ConfigError, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startEvents } from './index.js';
import { eventsOptions } from './options.js';

/**
 * The events service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. Needs
 * WORKSPACE_ADDR; consumes the event log the configuration names (KAFKA_BROKERS, else the
 * embedded log in DATABASE_URL's `bus` schema, shared by every process of the hub).
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const workspaceAddr = config.WORKSPACE_ADDR;
  if (!workspaceAddr) throw new ConfigError('The events service needs WORKSPACE_ADDR in split mode');
  return serviceProcess(config, log, 'events', (deps) => {
    if (!deps.bus) throw new ConfigError('The events service needs the event log');
    return startEvents({ ...deps, bus: deps.bus, workspaceAddr, ...eventsOptions(config) });
  }, { bus: true });
}
