import { startIdentity } from '@agenthub/identity';
import { identityv1, workspacev1 } from '@agenthub/proto';
import {
  createClient,
  HubError,
  Metrics,
  openDb,
  openKv,
  type CallOptions,
  type Client,
  type Db,
  type Kv,
  type Reason,
  type RunningService,
} from '@agenthub/runtime';
import { testLogger, type Backend } from '@agenthub/testing';
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
  const provisioned = await backend.provision();
  const opened: { db: Db[]; kv: Kv[]; services: RunningService[] } = { db: [], kv: [], services: [] };
  const deps = async (schema: string) => {
    const db = await openDb({ url: provisioned.databaseUrl, schema });
    const kv = await openKv({ url: provisioned.redisUrl, prefix: provisioned.redisPrefix });
    opened.db.push(db);
    opened.kv.push(kv);
    return { db, kv, log: testLogger(), metrics: new Metrics(), listen: '127.0.0.1:0', grpcTimeoutMs: 5000 };
  };
  const identityService = await startIdentity(await deps('identity'));
  opened.services.push(identityService);
  const workspaceDeps = await deps('workspace');
  const workspaceService = await startWorkspace({ ...workspaceDeps, identityAddr: identityService.address });
  opened.services.push(workspaceService);

  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000 });
  const workspace = createClient(workspacev1.WorkspaceService, workspaceService.address, { defaultTimeoutMs: 5000 });

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
      // Workspace first: it calls identity, not the other way round.
      for (const service of opened.services.reverse()) await service.stop(1000);
      await Promise.all([...opened.db.map((db) => db.close()), ...opened.kv.map((kv) => kv.close())]);
      await provisioned.dispose();
    },
  };
}

/** The HubError a call failed with, reduced to what the gateway shows. */
export async function failure(call: Promise<unknown>): Promise<{ reason: Reason; message: string; field: string }> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof HubError)) throw err;
    return { reason: err.reason, message: err.message, field: err.field };
  }
  throw new Error('Expected the call to fail');
}
