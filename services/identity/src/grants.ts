import { identityv1 } from '@agenthub/proto';
import { HubError, newId, Reason } from '@agenthub/runtime';
import type { GrantRecord, IdentityStore, StoredGrantStatus } from './store.js';

const GrantStatus = identityv1.GrantStatus;

/** The calling agent, as the gateway authenticated it. */
export interface Caller {
  agentId: string;
  tenantId: string;
}

// Someone else's grant is reported exactly like a missing one, so grant ids leak nothing.
const grantNotFound = () => new HubError(Reason.NOT_FOUND, 'Grant not found');

const involves = (grant: GrantRecord, agentId: string) =>
  grant.requesterAgentId === agentId || grant.targetAgentId === agentId;

/**
 * Asks `targetId` for access. While a pending or approved grant links the two agents, in either
 * direction, that grant is the answer (`created` false); the partial unique index on the pair
 * settles concurrent requests.
 */
export async function requestGrant(store: IdentityStore, caller: Caller, targetId: string): Promise<{ grant: GrantRecord; created: boolean }> {
  const target = await store.agent(targetId);
  if (!target) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  if (target.tenantId === caller.tenantId) {
    throw HubError.invalidOperation('Agents of the same tenant need no access grant');
  }
  // A lost insert race whose winner is revoked before we read it sends us round again.
  for (;;) {
    const live = await store.liveGrantBetween(caller.agentId, targetId);
    if (live) return { grant: live, created: false };
    const grant = await store.insertPendingGrant({
      id: newId('grt'),
      requesterAgentId: caller.agentId,
      targetAgentId: targetId,
      at: Date.now(),
    });
    if (grant) return { grant, created: true };
  }
}

/** Only the target approves; approving an approved grant returns it unchanged. */
export function approveGrant(store: IdentityStore, callerId: string, grantId: string): Promise<GrantRecord> {
  return store.transaction(async (tx) => {
    const grant = await tx.grantForUpdate(grantId);
    if (!grant || !involves(grant, callerId)) throw grantNotFound();
    if (grant.targetAgentId !== callerId) {
      throw HubError.invalidOperation('Only the requested agent can approve this grant');
    }
    switch (grant.status) {
      case GrantStatus.APPROVED:
        return grant;
      case GrantStatus.REVOKED:
        throw HubError.invalidOperation('Grant was revoked; request a new one');
      default:
        return tx.setGrantStatus(grantId, GrantStatus.APPROVED, Date.now());
    }
  });
}

/** Either party revokes, whatever the status; revoking a revoked grant returns it unchanged. */
export function revokeGrant(store: IdentityStore, callerId: string, grantId: string): Promise<GrantRecord> {
  return store.transaction(async (tx) => {
    const grant = await tx.grantForUpdate(grantId);
    if (!grant || !involves(grant, callerId)) throw grantNotFound();
    if (grant.status === GrantStatus.REVOKED) return grant;
    return tx.setGrantStatus(grantId, GrantStatus.REVOKED, Date.now());
  });
}

export function listGrants(
  store: IdentityStore,
  callerId: string,
  status: StoredGrantStatus | undefined,
): Promise<GrantRecord[]> {
  return store.grantsOf(callerId, status);
}

/** Reads the database on every call: a revocation must deny the very next request. */
export async function checkGrant(store: IdentityStore, agentId: string, otherAgentId: string): Promise<{ approved: boolean; grantId: string }> {
  const grant = await store.approvedGrantBetween(agentId, otherAgentId);
  return { approved: grant !== undefined, grantId: grant?.id ?? '' };
}
