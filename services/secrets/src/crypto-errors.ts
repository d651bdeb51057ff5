import { HubError, Reason } from '@agenthub/runtime';
import { KeyUnwrapError, UnknownKekVersionError } from './keys.js';
import { SecretIntegrityError } from './seal.js';

/**
 * Failures of the key hierarchy fail closed: the caller gets INTERNAL with a fixed message and
 * no value; the log gets the cause, which names the workspace, the secret key and the KEK
 * version but never holds a value or key material. Anything else passes through.
 */
export function failClosed(err: unknown): never {
  if (err instanceof SecretIntegrityError) {
    throw new HubError(Reason.INTERNAL, 'Secret could not be decrypted: integrity check failed', { cause: err });
  }
  if (err instanceof UnknownKekVersionError || err instanceof KeyUnwrapError) {
    throw new HubError(Reason.INTERNAL, 'Secret could not be decrypted: the workspace key is unavailable', { cause: err });
  }
  throw err;
}
