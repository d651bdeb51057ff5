import { workspacev1, type secretsv1 } from '@agenthub/proto';
import { callerOf, HubError, type CallContext } from '@agenthub/runtime';
import { requireOperator, requireRole, resolveAccess, workspaceGone, type SecretsEnv } from './access.js';
import { failClosed } from './crypto-errors.js';
import { KeyUnwrapError, UnknownKekVersionError } from './keys.js';
import { newDataKey, open, seal, type Sealed } from './seal.js';
import * as validate from './validate.js';

const { Role } = workspacev1;

/**
 * Workspace admin, or the operator. Re-seals every value of the workspace under a new random
 * data key, in one transaction holding the key row: sets wait for it, reads see the old or the
 * new generation whole. Any value that fails to open aborts the rotation and changes nothing.
 */
export async function rotateWorkspaceKey(env: SecretsEnv, ctx: CallContext, request: secretsv1.RotateWorkspaceKeyRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  if (ctx.principal?.kind !== 'operator') callerOf(ctx);
  // The operator too: a workspace that does not exist is NOT_FOUND, not "no key to rotate".
  requireRole(await resolveAccess(env, ctx, workspaceId), Role.ADMIN);
  const rotated = await env.store.rotateWorkspaceKey(
    ctx.signal,
    workspaceId,
    async (current, secrets) => {
      const oldKey = await env.keys.unwrap(current.wrapped, workspaceId).catch(failClosed);
      const newKey = newDataKey();
      try {
        const resealed = new Map<string, Sealed>();
        for (const secret of secrets) {
          let value: string;
          try {
            value = open(oldKey, workspaceId, secret.key, secret.sealed);
          } catch (err) {
            failClosed(err);
          }
          resealed.set(secret.key, seal(newKey, workspaceId, secret.key, value));
        }
        return { wrapped: await env.keys.wrap(newKey, workspaceId), resealed };
      } finally {
        oldKey.fill(0);
        newKey.fill(0);
      }
    },
    Date.now(),
  );
  const result = { workspaceId, generation: rotated?.generation ?? 0, resealed: rotated?.resealed ?? 0 };
  ctx.log.info({ workspace_id: workspaceId, generation: result.generation, resealed: result.resealed }, 'workspace data key rotated');
  return result;
}

/**
 * Operator only. Rewraps every data key not yet under the newest KEK, a batch per transaction,
 * values untouched. Safe while serving and on several replicas at once: each batch locks only
 * its rows, and sets do not wait for it. A key that cannot be unwrapped is logged, counted as
 * failed and left as it was. Returns how many keys this call rewrapped.
 */
export async function rotateKek(env: SecretsEnv, ctx: CallContext) {
  requireOperator(ctx);
  const kekVersion = env.keys.currentVersion;
  let afterId = '';
  let rewrapped = 0;
  let failed = 0;
  for (;;) {
    const batch = await env.store.rewrapBatch(ctx.signal, kekVersion, afterId, env.limits.rewrapBatchSize, async (record) => {
      let dataKey: Buffer;
      try {
        dataKey = await env.keys.unwrap(record.wrapped, record.workspaceId);
      } catch (err) {
        // One unreadable key must not hold back the others: it stays as it was, for an operator to look at.
        if (!(err instanceof UnknownKekVersionError || err instanceof KeyUnwrapError)) throw err;
        ctx.log.error({ err, workspace_id: record.workspaceId, kek_version: record.wrapped.kekVersion }, 'KEK rotation could not unwrap a data key');
        return undefined;
      }
      try {
        return await env.keys.wrap(dataKey, record.workspaceId);
      } finally {
        dataKey.fill(0);
      }
    });
    rewrapped += batch.rewrapped;
    failed += batch.failed;
    if (batch.lastId === undefined) break;
    afterId = batch.lastId;
  }
  const { total, byVersion } = await env.store.countKeys(ctx.signal);
  const summary = { kek_version: kekVersion, rewrapped, failed, total, by_version: byVersion };
  if (failed) ctx.log.error(summary, 'KEK rotation finished, but some data keys could not be rewrapped');
  else ctx.log.info(summary, 'KEK rotation finished');
  return { kekVersion, rewrapped, total, failed };
}

/**
 * Destroys a deleted workspace's data key and ciphertexts. The operator may do so at any time;
 * an agent (the workspace service, acting for the owner who just deleted the workspace) only
 * once the workspace service reports it NOT_FOUND. While the workspace exists, its owner is told
 * to delete the workspace first, anyone else gets the usual access errors.
 */
export async function deleteWorkspaceSecrets(env: SecretsEnv, ctx: CallContext, request: secretsv1.DeleteWorkspaceSecretsRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  if (ctx.principal?.kind !== 'operator') {
    callerOf(ctx);
    let access;
    try {
      access = await env.workspace.resolveAccess({ workspaceId }, { parent: ctx });
    } catch (err) {
      if (!workspaceGone(err)) throw err;
    }
    if (access) {
      if (!access.owner) throw HubError.permissionRequired('Owner access required');
      throw HubError.invalidOperation('Delete the workspace first: its secrets go with it');
    }
  }
  const purged = await env.store.destroyWorkspace(ctx.signal, workspaceId);
  if (purged.destroyed) ctx.log.info({ workspace_id: workspaceId, secrets_deleted: purged.secretsDeleted }, 'destroyed the data key of a deleted workspace');
  return { workspaceId, destroyed: purged.destroyed, secretsDeleted: purged.secretsDeleted };
}
