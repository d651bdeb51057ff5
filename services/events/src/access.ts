import { workspacev1 } from '@agenthub/proto';
import { HubError, type CallContext, type Client } from '@agenthub/runtime';

export { callerOf, type Caller } from '@agenthub/runtime';

const { Role } = workspacev1;

/** The part of the workspace service this one calls: the caller's role in a workspace. */
export type WorkspaceClient = Pick<Client<typeof workspacev1.WorkspaceService.method>, 'resolveAccess'>;

/**
 * Every webhook method needs the admin role. Asked of the workspace service on every call
 * (never cached), so a revoked grant or a demoted member is refused on the very next call; its
 * errors pass through unchanged (NOT_FOUND `Workspace not found`, ACCESS_DENIED `Access denied`).
 */
export async function requireAdmin(workspace: WorkspaceClient, ctx: CallContext, workspaceId: string): Promise<void> {
  const access = await workspace.resolveAccess({ workspaceId }, { parent: ctx });
  if (access.role < Role.ADMIN) throw HubError.permissionRequired('Admin access required');
}
