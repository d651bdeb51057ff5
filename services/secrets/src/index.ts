/**
 * The secrets service: workspace secrets under envelope encryption (a versioned KEK wraps one
 * random data key per workspace; values sealed with AES-256-GCM), authorized by the workspace
 * service on every call.
 */
import { secretsv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, serveGrpc, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import type { SecretsLimits } from './access.js';
import type { KeyWrapper } from './keys.js';
import { createSecretsHandlers } from './server.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { secretsOptions } from './options.js';
/** The SecretsService handlers; each call asks the workspace service for the caller's role first. */
export { createSecretsHandlers } from './server.js';
/** The workspace client the service authorizes through, and its limits (secrets per workspace, data keys rewrapped per RotateKek transaction). */
export type { WorkspaceClient, SecretsLimits } from './access.js';
export { DEFAULT_LIMITS } from './access.js';
/** Envelope encryption's KEKs: HUB_KEKS or the generated file (with a warning); unwrapping throws UnknownKekVersionError or KeyUnwrapError, never returns a wrong key. */
export {
  LocalKeyWrapper,
  loadKeyWrapper,
  KEK_FILE,
  UnknownKekVersionError,
  KeyUnwrapError,
  type KeyWrapper,
  type WrappedKey,
} from './keys.js';
/** A sealed value failed authentication (altered, moved, or under another key): thrown, never decrypted to garbage. */
export { SecretIntegrityError } from './seal.js';
/** What a secret's key and value may be; anything else is INVALID_ARGUMENT naming the field. */
export { KEY_PATTERN, VALUE_MAX_BYTES } from './validate.js';

export interface SecretsDeps extends ServiceDeps {
  /** `host:port` of the workspace service, asked for the caller's role on every call. */
  workspaceAddr: string;
  /** Wraps and unwraps workspace data keys: `loadKeyWrapper(...)`, or a KMS adapter. */
  keyWrapper: KeyWrapper;
  limits?: Partial<SecretsLimits>;
}

/**
 * Migrates the `secrets` schema and serves SecretsService. Stopping it also closes its workspace
 * client; the database and Kv it was given stay open.
 */
export async function startSecrets(deps: SecretsDeps): Promise<RunningService> {
  const workspace = createClient(workspacev1.WorkspaceService, deps.workspaceAddr, clientOptions(deps));
  try {
    const running = await serveGrpc(
      'secrets',
      deps,
      // Its events share their keys (workspace ids) with the workspace service's: see serveGrpc.
      { schema: 'secrets', migrations: new URL('../migrations/', import.meta.url), publishBeforeAnswer: true },
      (server, db) =>
        server.add(
          secretsv1.SecretsService,
          createSecretsHandlers({ db, workspace, keyWrapper: deps.keyWrapper, limits: deps.limits }),
        ),
    );
    return {
      name: running.name,
      address: running.address,
      async stop(graceMs) {
        await running.stop(graceMs);
        workspace.close();
      },
    };
  } catch (err) {
    workspace.close();
    throw err;
  }
}
