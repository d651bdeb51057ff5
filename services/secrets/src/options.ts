import type { HubConfig, Logger } from '@agenthub/runtime';
import type { SecretsDeps } from './index.js';
import { loadKeyWrapper } from './keys.js';

/**
 * The secrets service's settings from configuration (HUB_KEKS, HUB_DATA_DIR): the one mapping,
 * used by its `main.ts` and by the all-in-one hub.
 *
 * Without HUB_KEKS the key-encryption key is the generated `<HUB_DATA_DIR>/secrets-kek`. A split
 * process may generate it only with the embedded database: replicas sharing DATABASE_URL must hold
 * the same keys, so none may make its own. The all-in-one hub (`oneProcess`) is a single process
 * and always may, as it always did.
 */
export async function secretsOptions(config: HubConfig, log: Logger, mode: { oneProcess: boolean }): Promise<Pick<SecretsDeps, 'keyWrapper'>> {
  const keyWrapper = await loadKeyWrapper({
    keks: config.HUB_KEKS,
    dataDir: config.HUB_DATA_DIR,
    generate: mode.oneProcess || !config.DATABASE_URL,
    log,
  });
  return { keyWrapper };
}
