import { workspacev1 } from '@agenthub/proto';
import { HubError, Reason, type CallContext, type Client } from '@agenthub/runtime';
import type { KeyWrapper } from './keys.js';
import type { SecretsStore } from './store.js';

const { Role } = workspacev1;
type Role = workspacev1.Role;

/** The part of the workspace service this one calls: the caller's role in a workspace. */
export type WorkspaceClient = Pick<Client<typeof workspacev1.WorkspaceService.method>, 'resolveAccess'>;

/** What the domain modules work with. */
export interface SecretsEnv {
  store: SecretsStore;
  workspace: WorkspaceClient;
  keys: KeyWrapper;
  limits: SecretsLimits;
}

export interface SecretsLimits {
  /** Most secrets one workspace holds. */
  maxSecretsPerWorkspace: number;
  /** Data keys rewrapped per transaction by RotateKek. */
  rewrapBatchSize: number;
}

export const DEFAULT_LIMITS: SecretsLimits = { maxSecretsPerWorkspace: 1000, rewrapBatchSize: 100 };

export interface Access {
  role: Role;
  owner: boolean;
}

export function requireOperator(ctx: CallContext): void {
  if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.ACCESS_DENIED, 'Operator access required');
}

/**
 * The workspace service's answer for a workspace that does not exist (any more): ResolveAccess
 * returns NOT_FOUND for nothing else (its contract in workspace.proto), whatever its message says.
 */
export function workspaceGone(err: unknown): boolean {
  return err instanceof HubError && err.reason === Reason.NOT_FOUND;
}

/**
 * The caller's role in the workspace, asked of the workspace service on every call (never
 * cached), so a revoked grant or a removed member is denied on the very next call. Its errors
 * pass through unchanged: NOT_FOUND `Workspace not found`, ACCESS_DENIED `Access denied`.
 *
 * A workspace the workspace service no longer knows is gone for good (ids are never reused), so
 * its data key and ciphertexts are destroyed here too, should DeleteWorkspaceSecrets not have
 * been called when it was deleted.
 */
export async function resolveAccess(env: SecretsEnv, ctx: CallContext, workspaceId: string): Promise<Access> {
  try {
    // Grouped: the calls that come while earlier ones are on the wire share one ResolveAccesses
    // round trip, each signed for its own caller and checked as if it had come alone.
    const access = await env.workspace.resolveAccess({ workspaceId }, { parent: ctx, grouped: true });
    return { role: access.role, owner: access.owner };
  } catch (err) {
    if (workspaceGone(err)) await purgeDeleted(env, ctx, workspaceId);
    throw err;
  }
}

/** Destroys a deleted workspace's key material; failures are logged, never shown to the caller. */
export async function purgeDeleted(env: SecretsEnv, ctx: CallContext, workspaceId: string) {
  try {
    const purged = await env.store.destroyWorkspace(ctx.signal, workspaceId);
    if (purged.destroyed) {
      ctx.log.info({ workspace_id: workspaceId, secrets_deleted: purged.secretsDeleted }, 'destroyed the data key of a deleted workspace');
    }
    return purged;
  } catch (err) {
    ctx.log.error({ err, workspace_id: workspaceId }, 'could not destroy the data key of a deleted workspace');
    return undefined;
  }
}

// The enum's numbers follow read < write < admin, so comparing them compares privilege.
export function requireRole(access: Access, needed: typeof Role.WRITE | typeof Role.ADMIN): void {
  if (access.role >= needed) return;
  throw HubError.permissionRequired(needed === Role.ADMIN ? 'Admin access required' : 'Write access required');
}
