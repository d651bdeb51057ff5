import { ConfigError, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startSecrets } from './index.js';
import { secretsOptions } from './options.js';

/**
 * The secrets service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. Needs
 * WORKSPACE_ADDR, and HUB_KEKS whenever the database is shared (DATABASE_URL): replicas must
 * hold the same key-encryption keys, so none may generate its own. With the embedded database
 * (one process) the generated `<HUB_DATA_DIR>/secrets-kek` is used, with a warning.
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const workspaceAddr = config.WORKSPACE_ADDR;
  if (!workspaceAddr) throw new ConfigError('The secrets service needs WORKSPACE_ADDR in split mode');
  const options = await secretsOptions(config, log, { oneProcess: false });
  return serviceProcess(config, log, 'secrets', (deps) => startSecrets({ ...deps, workspaceAddr, ...options }), { bus: true });
}
