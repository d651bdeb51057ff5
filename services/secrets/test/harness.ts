import { randomBytes } from 'node:crypto';
import { startIdentity } from '@agenthub/identity';
import { identityv1, secretsv1, workspacev1 } from '@agenthub/proto';
import { createClient, type CallOptions, type Client, type Db, type InternalKey, type Logger } from '@agenthub/runtime';
import { TestStackBackends, type Backend } from '@agenthub/testing';
import { startWorkspace } from '@agenthub/workspace';
import { LocalKeyWrapper, startSecrets, type KeyWrapper, type SecretsLimits } from '../src/index.js';
import { recording, rememberKey, suiteLogger } from './capture.js';

export interface TestAgent {
  id: string;
  tenantId: string;
  name: string;
  as: CallOptions;
}

export type SecretsClient = Client<typeof secretsv1.SecretsService.method> & { close(): void };

/** Identity, workspace and secrets services on one provisioned backend, each in its own schema. */
export interface Stack {
  identity: Client<typeof identityv1.IdentityService.method> & { close(): void };
  workspace: Client<typeof workspacev1.WorkspaceService.method> & { close(): void };
  /** A client of the running secrets service (replaced by restartSecrets). */
  readonly secrets: SecretsClient;
  readonly secretsAddress: string;
  /** What the stack's services sign and check calls with, for the test's own clients. */
  readonly internalKey: InternalKey;
  /** The secrets service's own database, for looking at (and tampering with) its tables. */
  db: Db;
  log: Logger;
  agent(tenantId: string, name: string): Promise<TestAgent>;
  grant(from: TestAgent, to: TestAgent): Promise<string>;
  revoke(by: TestAgent, grantId: string): Promise<void>;
  /** A workspace of `owner`'s with the given members added by the owner. */
  workspaceWith(owner: TestAgent, members?: [TestAgent, workspacev1.Role][]): Promise<string>;
  /** Stops the secrets service and starts a new one on the same database. */
  restartSecrets(keyWrapper?: KeyWrapper): Promise<void>;
  stop(): Promise<void>;
}

export const operator: CallOptions = { principal: { kind: 'operator' } };

/** A fresh `v<version>:<base64>` KEK entry, remembered for the leak check. */
export function kekEntry(version: number): string {
  const material = randomBytes(32);
  rememberKey(material);
  return `v${version}:${material.toString('base64')}`;
}

/** A recording LocalKeyWrapper over the given entries. */
export function wrapper(...entries: string[]): KeyWrapper {
  return recording(LocalKeyWrapper.parse(entries.join(',')));
}

export async function startStack(
  backend: Backend,
  /** `restartable`, for restartSecrets: an embedded secrets database on disk (slower) instead of in memory. */
  options: { keyWrapper?: KeyWrapper; limits?: Partial<SecretsLimits>; restartable?: boolean } = {},
): Promise<Stack> {
  const log = suiteLogger();
  const backends = await TestStackBackends.open(backend, log);
  const identityService = backends.started(await startIdentity(await backends.deps('identity')));
  const workspaceService = backends.started(await startWorkspace({ ...(await backends.deps('workspace')), identityAddr: identityService.address }));
  // Durable when restartable, so that restartSecrets reaches the same data through new handles.
  let secretsDeps = await backends.deps('secrets', { durable: options.restartable });
  let keyWrapper = options.keyWrapper ?? wrapper(kekEntry(1));
  let secretsService = await startSecrets({ ...secretsDeps, workspaceAddr: workspaceService.address, keyWrapper, limits: options.limits });

  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  const workspace = createClient(workspacev1.WorkspaceService, workspaceService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  let secrets = createClient(secretsv1.SecretsService, secretsService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });

  const stack: Stack = {
    identity,
    workspace,
    get secrets() {
      return secrets;
    },
    internalKey: backends.internalKey,
    get secretsAddress() {
      return secretsService.address;
    },
    get db() {
      return secretsDeps.db;
    },
    log,
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
    async workspaceWith(owner, members = []) {
      const { workspace: created } = await workspace.createWorkspace({ name: 'Secrets' }, owner.as);
      const workspaceId = created!.id;
      for (const [agent, role] of members) await workspace.addMember({ workspaceId, agentId: agent.id, role }, owner.as);
      return workspaceId;
    },
    async restartSecrets(next) {
      if (!options.restartable) throw new Error('restartSecrets needs startStack(backend, { restartable: true })');
      secrets.close();
      await secretsService.stop(1000);
      keyWrapper = next ?? keyWrapper;
      secretsDeps = await backends.reopen(secretsDeps);
      secretsService = await startSecrets({ ...secretsDeps, workspaceAddr: workspaceService.address, keyWrapper, limits: options.limits });
      secrets = createClient(secretsv1.SecretsService, secretsService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
    },
    async stop() {
      identity.close();
      workspace.close();
      secrets.close();
      await secretsService.stop(1000);
      await backends.close();
    },
  };
  return stack;
}

export { failure } from '@agenthub/testing';
