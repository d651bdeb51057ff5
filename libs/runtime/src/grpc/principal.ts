import type { Metadata } from '@grpc/grpc-js';

/**
 * Who a call acts for. The gateway authenticates the caller and asserts the principal in
 * metadata; a service trusts it only once the call's signature checks (signature.ts).
 */
export type Principal =
  | { kind: 'agent'; agentId: string; tenantId: string }
  | { kind: 'operator' };

const AGENT_ID = 'x-hub-agent-id';
const TENANT_ID = 'x-hub-tenant-id';
const OPERATOR = 'x-hub-operator';

export function writePrincipal(principal: Principal, metadata: Metadata): void {
  if (principal.kind === 'operator') {
    metadata.set(OPERATOR, '1');
    return;
  }
  metadata.set(AGENT_ID, principal.agentId);
  metadata.set(TENANT_ID, principal.tenantId);
}

export function readPrincipal(metadata: Metadata): Principal | undefined {
  return principalOf({ operator: metadata.get(OPERATOR)[0] === '1', agentId: metadata.get(AGENT_ID)[0], tenantId: metadata.get(TENANT_ID)[0] });
}

/** The principal as plain fields (how a call of a group carries it): empty ids unless an agent. */
export function principalFields(principal: Principal | undefined): { agentId: string; tenantId: string; operator: boolean } {
  return principal?.kind === 'agent'
    ? { agentId: principal.agentId, tenantId: principal.tenantId, operator: false }
    : { agentId: '', tenantId: '', operator: principal?.kind === 'operator' };
}

/** The principal those fields name: the operator when flagged, else an agent when both ids are there, else none. */
export function principalOf(fields: { operator: boolean; agentId: unknown; tenantId: unknown }): Principal | undefined {
  if (fields.operator) return { kind: 'operator' };
  const { agentId, tenantId } = fields;
  if (typeof agentId === 'string' && agentId && typeof tenantId === 'string' && tenantId) return { kind: 'agent', agentId, tenantId };
  return undefined;
}
