import { identityv1 } from '@agenthub/proto';
import { HubError, newId, Reason } from '@agenthub/runtime';
import type { GrantCursor, GrantRecord, IdentityStore, StoredGrantStatus } from './store.js';

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
 * settles concurrent requests. A pair whose grant was revoked has that row reused for the new
 * request (a new id), so request/revoke loops do not grow the table.
 */
export async function requestGrant(store: IdentityStore, signal: AbortSignal, caller: Caller, targetId: string): Promise<{ grant: GrantRecord; created: boolean }> {
  const target = await store.agent(signal, targetId);
  if (!target) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  if (target.tenantId === caller.tenantId) {
    throw HubError.invalidOperation('Agents of the same tenant need no access grant');
  }
  // A lost insert race whose winner is revoked before we read it sends us round again.
  for (;;) {
    const live = await store.liveGrantBetween(signal, caller.agentId, targetId);
    if (live) return { grant: live, created: false };
    const fresh = { id: newId('grt'), requesterAgentId: caller.agentId, targetAgentId: targetId, at: Date.now() };
    const reopened = await store.reopenRevokedGrant(signal, fresh);
    if (reopened) return { grant: reopened, created: true };
    const grant = await store.insertPendingGrant(signal, fresh);
    if (grant) return { grant, created: true };
  }
}

/** Only the target approves; approving an approved grant returns it unchanged. */
export function approveGrant(store: IdentityStore, signal: AbortSignal, callerId: string, grantId: string): Promise<GrantRecord> {
  return store.transaction(signal, async (tx) => {
    const grant = await tx.grantForUpdate(signal, grantId);
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
        return tx.setGrantStatus(signal, grantId, GrantStatus.APPROVED, Date.now());
    }
  });
}

/** Either party revokes, whatever the status; revoking a revoked grant returns it unchanged. */
export function revokeGrant(store: IdentityStore, signal: AbortSignal, callerId: string, grantId: string): Promise<GrantRecord> {
  return store.transaction(signal, async (tx) => {
    const grant = await tx.grantForUpdate(signal, grantId);
    if (!grant || !involves(grant, callerId)) throw grantNotFound();
    if (grant.status === GrantStatus.REVOKED) return grant;
    return tx.setGrantStatus(signal, grantId, GrantStatus.REVOKED, Date.now());
  });
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 100;

/** The caller's grants, newest first, one page at a time. */
export async function listGrants(
  store: IdentityStore,
  signal: AbortSignal,
  callerId: string,
  request: { status: StoredGrantStatus | undefined; pageSize: number; pageToken: string },
): Promise<{ grants: GrantRecord[]; nextPageToken: string }> {
  if (request.pageSize < 0 || request.pageSize > MAX_PAGE) throw HubError.invalidParams('page_size', `must be between 1 and ${MAX_PAGE}`);
  const size = request.pageSize || DEFAULT_PAGE;
  const rows = await store.grantsOf(signal, callerId, request.status, {
    limit: size + 1,
    after: request.pageToken ? grantCursor(request.pageToken) : undefined,
  });
  const shown = rows.slice(0, size);
  return { grants: shown.map((r) => r.grant), nextPageToken: rows.length > size ? pageToken(shown.at(-1)!.position) : '' };
}

/** Opaque to callers: the (created_at, seq) of the last grant of the previous page. */
function pageToken(cursor: GrantCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.seq])).toString('base64url');
}

function grantCursor(token: string): GrantCursor {
  try {
    const [createdAt, seq] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown[];
    // Decoded text is the caller's: only what we could have issued goes on to the query.
    if (Number.isSafeInteger(createdAt) && Number.isSafeInteger(seq) && (createdAt as number) >= 0 && (seq as number) >= 0) {
      return { createdAt: createdAt as number, seq: seq as number };
    }
  } catch {
    // Falls through to the refusal: a token we did not issue.
  }
  throw HubError.invalidParams('page_token', 'is not a token from a previous page');
}

/** Reads the database on every call: a revocation must deny the very next request. */
export async function checkGrant(store: IdentityStore, signal: AbortSignal, agentId: string, otherAgentId: string): Promise<{ approved: boolean; grantId: string }> {
  const grant = await store.approvedGrantBetween(signal, agentId, otherAgentId);
  return { approved: grant !== undefined, grantId: grant?.id ?? '' };
}
