import { HubError, isUniqueViolation, newId, newSecret, Reason } from '@agenthub/runtime';
import { issueKey, type IssuedKey } from './keys.js';
import type { AgentRecord, AgentSkillRecord, IdentityStore } from './store.js';

/** A validated CreateAgent request. */
export interface NewAgent {
  tenantId: string;
  name: string;
  /** Generated when undefined. */
  agentId: string | undefined;
  endpointUrl: string;
  outputModes: string[];
  /** For the agent's Agent Card. */
  description: string;
  skills: AgentSkillRecord[];
  /** Create the tenant (named after its id) when it does not exist. */
  createTenant: boolean;
}

export interface CreatedAgent extends IssuedKey {
  agent: AgentRecord;
  tenantCreated: boolean;
  /** A push agent's push secret, shown once; empty for agents without an endpoint. */
  pushSecret: string;
}

/** Prefix of push secrets, so a leaked one is recognisable (secret scanners, logs). */
const PUSH_SECRET_PREFIX = 'ahp';

/** A new push secret: `ahp_` and 32 random bytes in base64url. */
export function newPushSecret(): string {
  return newSecret(PUSH_SECRET_PREFIX);
}

export function agentsQuotaExceeded(max: number): HubError {
  return HubError.quotaExceeded('agents_per_tenant', `Quota exceeded: a tenant has at most ${max} agents`);
}

/**
 * Registers the agent and issues its first key in one transaction: no agent without a key. The
 * tenant's agents count against `agents_per_tenant` (its override, else `maxAgents`).
 */
export function createAgent(store: IdentityStore, signal: AbortSignal, input: NewAgent, maxAgents: number): Promise<CreatedAgent> {
  return store.transaction(signal, async (tx) => {
    const now = Date.now();
    let tenantCreated = false;
    if (!(await tx.tenant(signal, input.tenantId))) {
      if (!input.createTenant) throw new HubError(Reason.NOT_FOUND, 'Tenant not found');
      // A concurrent request may create it first; either way it exists afterwards.
      tenantCreated = (await tx.insertTenant(signal, { id: input.tenantId, name: input.tenantId, at: now })) !== undefined;
    }
    const limits = await tx.lockTenantLimits(signal, input.tenantId);
    const max = limits?.quotas?.agents_per_tenant ?? maxAgents;
    if ((await tx.agentCount(signal, input.tenantId)) >= max) throw agentsQuotaExceeded(max);
    const id = input.agentId ?? newId('agt');
    const pushSecret = input.endpointUrl ? newPushSecret() : '';
    let agent: AgentRecord;
    try {
      agent = await tx.insertAgent(signal, {
        id,
        tenantId: input.tenantId,
        name: input.name,
        endpointUrl: input.endpointUrl,
        outputModes: input.outputModes,
        description: input.description,
        skills: input.skills,
        at: now,
        pushSecret: pushSecret || null,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new HubError(Reason.ALREADY_EXISTS, `Agent ${id} already exists`);
      throw err;
    }
    const issued = await issueKey(tx, signal, agent.id);
    if (!issued) throw new Error(`Agent ${agent.id} missing right after its insert`);
    return { agent, tenantCreated, ...issued, pushSecret };
  });
}

/** Gives a push agent a new push secret; the old one is not sent again. */
export async function rotatePushSecret(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<string> {
  const secret = newPushSecret();
  if (await store.setPushSecret(signal, agentId, secret)) return secret;
  if (!(await store.agent(signal, agentId))) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  throw new HubError(Reason.INVALID_OPERATION, 'The agent has no endpoint_url: only push agents have a push secret', { field: 'agent_id' });
}

/** The push secret the push worker presents to the agent's endpoint; empty when it has none. */
export async function pushCredential(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<string> {
  const secret = await store.pushSecret(signal, agentId);
  if (secret === undefined) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  return secret ?? '';
}

export async function getAgent(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<AgentRecord> {
  const agent = await store.agent(signal, agentId);
  if (!agent) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  return agent;
}

/** Every tenant's agents when `tenantId` is undefined. */
export async function listAgents(store: IdentityStore, signal: AbortSignal, tenantId: string | undefined): Promise<AgentRecord[]> {
  if (tenantId !== undefined && !(await store.tenant(signal, tenantId))) throw new HubError(Reason.NOT_FOUND, 'Tenant not found');
  return store.agents(signal, tenantId);
}
