import { workspacev1, type secretsv1 } from '@agenthub/proto';
import { HubError, Reason, type CallContext, type Caller } from '@agenthub/runtime';
import { requireRole, resolveAccess, type SecretsEnv } from './access.js';
import { failClosed } from './crypto-errors.js';
import { newDataKey, open, seal } from './seal.js';
import type { KeyRecord, SecretInfoRecord } from './store.js';
import * as validate from './validate.js';

const { Role } = workspacev1;

/** The wire shape of a secret's metadata; the value travels only in GetSecretResponse. */
export function secretInfo(secret: SecretInfoRecord) {
  return { key: secret.key, createdAt: BigInt(secret.createdAt), updatedAt: BigInt(secret.updatedAt) };
}

/** Unwraps a data key, failing closed. Callers zero the returned buffer when done with it. */
export async function unwrapKey(env: SecretsEnv, record: KeyRecord): Promise<Buffer> {
  try {
    return await env.keys.unwrap(record.wrapped, record.workspaceId);
  } catch (err) {
    return failClosed(err);
  }
}

/** The workspace's current data key, creating (and wrapping) its first one when it has none. */
async function currentKey(env: SecretsEnv, signal: AbortSignal, workspaceId: string): Promise<{ record: KeyRecord; dataKey: Buffer }> {
  let record = await env.store.getKey(signal, workspaceId);
  if (!record) {
    const fresh = newDataKey();
    try {
      const wrapped = await env.keys.wrap(fresh, workspaceId);
      record = await env.store.insertKey(signal, workspaceId, wrapped, Date.now());
      // Another call created the workspace's key first: use that one.
      if (record) return { record, dataKey: fresh };
    } catch (err) {
      fresh.fill(0);
      throw err;
    }
    fresh.fill(0);
    record = await env.store.getKey(signal, workspaceId);
    if (!record) throw new HubError(Reason.UNAVAILABLE, 'The workspace key changed concurrently; retry');
  }
  return { record, dataKey: await unwrapKey(env, record) };
}

/** How often a set re-seals when a workspace key rotation slips in between. */
const SET_ATTEMPTS = 3;

/** Write role. Seals the value under the workspace key with a fresh nonce and stores it with its event. */
export async function setSecret(env: SecretsEnv, ctx: CallContext, caller: Caller, request: secretsv1.SetSecretRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const key = validate.key(request.key);
  const value = validate.value(request.value);
  requireRole(await resolveAccess(env, ctx, workspaceId), Role.WRITE);
  for (let attempt = 0; attempt < SET_ATTEMPTS; attempt += 1) {
    const { record, dataKey } = await currentKey(env, ctx.signal, workspaceId);
    let sealed;
    try {
      sealed = seal(dataKey, workspaceId, key, value);
    } finally {
      dataKey.fill(0);
    }
    const stored = await env.store.putSecret(ctx.signal, {
      workspaceId,
      key,
      generation: record.generation,
      sealed,
      agentId: caller.agentId,
      now: Date.now(),
      maxSecrets: env.limits.maxSecretsPerWorkspace,
    });
    if (stored.status === 'stored') return { secret: secretInfo(stored.secret), created: stored.created };
    if (stored.status === 'limited') {
      throw HubError.quotaExceeded('secrets_per_workspace', `Quota exceeded: a workspace holds at most ${env.limits.maxSecretsPerWorkspace} secrets; delete one first`);
    }
    // Keys are destroyed only with their workspace: it was deleted after the access check.
    if (stored.status === 'gone') throw HubError.notFound();
    // 'stale': the key was rotated after we read it. Seal again with the new one.
  }
  throw new HubError(Reason.UNAVAILABLE, 'The workspace key is being rotated; retry');
}

/**
 * Any role. The secret is read while the workspace service is asked, so the two round trips
 * overlap; nothing read is used (or decrypted) before access is confirmed.
 */
export async function getSecret(env: SecretsEnv, ctx: CallContext, _caller: Caller, request: secretsv1.GetSecretRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const key = validate.key(request.key);
  const reading = env.store.getSecret(ctx.signal, workspaceId, key);
  // Kept from surfacing as an unhandled rejection should the access check fail first.
  reading.catch(() => undefined);
  await resolveAccess(env, ctx, workspaceId);
  const found = await reading;
  if (!found) throw HubError.notFound('Secret not found');
  const { secret, dataKey: record } = found;
  const dataKey = await unwrapKey(env, record);
  try {
    const value = open(dataKey, workspaceId, key, secret.sealed);
    return { secret: secretInfo(secret), value };
  } catch (err) {
    return failClosed(err);
  } finally {
    dataKey.fill(0);
  }
}

/** Any role: keys and timestamps, ordered by key, never values. */
export async function listSecrets(env: SecretsEnv, ctx: CallContext, _caller: Caller, request: secretsv1.ListSecretsRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const listing = env.store.listSecrets(ctx.signal, workspaceId);
  listing.catch(() => undefined);
  await resolveAccess(env, ctx, workspaceId);
  return { secrets: (await listing).map(secretInfo) };
}

/** Write role. */
export async function deleteSecret(env: SecretsEnv, ctx: CallContext, caller: Caller, request: secretsv1.DeleteSecretRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const key = validate.key(request.key);
  requireRole(await resolveAccess(env, ctx, workspaceId), Role.WRITE);
  if (!(await env.store.deleteSecret(ctx.signal, workspaceId, key, caller.agentId))) throw HubError.notFound('Secret not found');
  return { workspaceId, key };
}
