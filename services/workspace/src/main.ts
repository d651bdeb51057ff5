import { secretsv1 } from '@agenthub/proto';
import { clientOptions, ConfigError, createClient, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { destroySecretsWith, startWorkspace, workspaceQuotas } from './index.js';

/**
 * The workspace service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. With
 * SECRETS_ADDR it tells the secrets service about deleted workspaces at once; without it, the
 * secrets service purges a deleted workspace's keys on its next call for that workspace.
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const identityAddr = config.IDENTITY_ADDR;
  if (!identityAddr) throw new ConfigError('The workspace service needs IDENTITY_ADDR in split mode');
  const secretsAddr = config.SECRETS_ADDR;
  return serviceProcess(config, log, 'workspace', async (deps) => {
    const secrets = secretsAddr ? createClient(secretsv1.SecretsService, secretsAddr, clientOptions(deps)) : undefined;
    const running = await startWorkspace({ ...deps, identityAddr, memory: config, quotas: workspaceQuotas(config), afterDelete: destroySecretsWith(() => secrets) });
    return {
      ...running,
      async stop(graceMs) {
        await running.stop(graceMs);
        secrets?.close();
      },
    };
  }, { bus: true });
}
