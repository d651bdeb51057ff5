import { workspacev1 } from '@agenthub/proto';
import { HubError, Reason, type CallContext, type Client } from '@agenthub/runtime';

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

/**
 * Whether a webhook's creator still has the admin role in its workspace, asked of the workspace
 * service's ResolveAccess (as the operator, naming the creator) before each delivery attempt, so
 * removing the creator, demoting it or revoking the grant behind its membership stops the
 * webhook on every replica and across restarts. A yes is trusted for `cacheMs` (on the service
 * clock) per replica; a no is never remembered. A deleted workspace answers yes: its last event
 * (`workspace.deleted`) still goes out to the webhooks it retired.
 */
export class CreatorAccess {
  private readonly allowed = new Map<string, number>();

  constructor(
    private readonly workspace: WorkspaceClient,
    private readonly cacheMs: number,
    private readonly clock: () => number,
    private readonly maxEntries = 10_000,
  ) {}

  async isAdmin(workspaceId: string, agentId: string, signal?: AbortSignal): Promise<boolean> {
    const key = `${workspaceId}\u0000${agentId}`;
    const now = this.clock();
    if ((this.allowed.get(key) ?? -Infinity) > now) return true;
    let admin: boolean;
    try {
      const access = await this.workspace.resolveAccess({ workspaceId, agentId }, { principal: { kind: 'operator' }, signal });
      admin = access.role >= Role.ADMIN;
    } catch (err) {
      if (err instanceof HubError && err.reason === Reason.ACCESS_DENIED) admin = false;
      else if (err instanceof HubError && err.reason === Reason.NOT_FOUND) return true;
      else throw err;
    }
    if (!admin) {
      this.allowed.delete(key);
      return false;
    }
    if (this.cacheMs > 0) {
      if (this.allowed.size >= this.maxEntries) this.allowed.delete(this.allowed.keys().next().value!);
      this.allowed.set(key, now + this.cacheMs);
    }
    return true;
  }
}
