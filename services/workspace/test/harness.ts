import { startIdentity } from '@agenthub/identity';
import { identityv1, workspacev1 } from '@agenthub/proto';
import { createClient, type CallOptions, type Client, type Db } from '@agenthub/runtime';
import { TestStackBackends, testLogger, type Backend } from '@agenthub/testing';
import { startWorkspace } from '../src/index.js';

/** An agent registered with the real identity service, and the call options that act for it. */
export interface TestAgent {
  id: string;
  tenantId: string;
  name: string;
  as: CallOptions;
}

/** Identity and workspace services on one provisioned backend, each with its own schema. */
export interface Stack {
  identity: Client<typeof identityv1.IdentityService.method> & { close(): void };
  workspace: Client<typeof workspacev1.WorkspaceService.method> & { close(): void };
  /** The workspace service's own database (schema `workspace`), for reading what it wrote. */
  workspaceDb: Db;
  /** Registers an agent (creating its tenant when needed) through the operator principal. */
  agent(tenantId: string, name: string): Promise<TestAgent>;
  /** Requests a grant from `from` to `to` and has `to` approve it; returns the grant id. */
  grant(from: TestAgent, to: TestAgent): Promise<string>;
  revoke(by: TestAgent, grantId: string): Promise<void>;
  stop(): Promise<void>;
}

export const operator: CallOptions = { principal: { kind: 'operator' } };

export async function startStack(backend: Backend): Promise<Stack> {
  const backends = await TestStackBackends.open(backend, testLogger());
  const identityService = backends.started(await startIdentity(await backends.deps('identity')));
  const workspaceDeps = await backends.deps('workspace');
  const workspaceService = backends.started(await startWorkspace({ ...workspaceDeps, identityAddr: identityService.address }));

  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  const workspace = createClient(workspacev1.WorkspaceService, workspaceService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });

  return {
    identity,
    workspace,
    workspaceDb: workspaceDeps.db,
    async agent(tenantId, name) {
      const { agent } = await identity.createAgent({ tenantId, name, createTenant: true }, operator);
      if (!agent) throw new Error('CreateAgent returned no agent');
      return { id: agent.id, tenantId, name, as: { principal: { kind: 'agent', agentId: agent.id, tenantId } } };
    },
    async grant(from, to) {
      const { grant } = await identity.requestGrant({ agentId: to.id }, from.as);
      const approved = await identity.approveGrant({ grantId: grant?.id ?? '' }, to.as);
      return approved.grant?.id ?? '';
    },
    async revoke(by, grantId) {
      await identity.revokeGrant({ grantId }, by.as);
    },
    async stop() {
      identity.close();
      workspace.close();
      await backends.close();
    },
  };
}

export { failure } from '@agenthub/testing';
