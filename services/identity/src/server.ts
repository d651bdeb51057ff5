import { identityv1 } from '@agenthub/proto';
import { checkTargetUrl, egressPolicy, HubError, Reason, type CallContext, type Db, type EgressPolicy, type Kv, type Principal, type ServiceHandlers } from '@agenthub/runtime';
import { createAgent, getAgent, listAgents, pushCredential, rotatePushSecret } from './agents.js';
import { approveGrant, checkGrant, listGrants, requestGrant, revokeGrant } from './grants.js';
import { authenticate, createApiKey, listApiKeys, revokeApiKey } from './keys.js';
import { IdentityStore } from './store.js';
import { createTenant, getTenantLimits, getTenantUsage, listTenants, setTenantLimits } from './tenants.js';

/** The identity service's quotas (HUB_QUOTA_AGENTS_PER_TENANT), defaults for tenants without an override. */
export interface IdentityQuotas {
  agentsPerTenant: number;
}

/** HUB_QUOTA_AGENTS_PER_TENANT's default, for services started without a configuration (tests). */
export const DEFAULT_IDENTITY_QUOTAS: IdentityQuotas = { agentsPerTenant: 10_000 };
import * as valid from './validate.js';

/** One handler per IdentityService RPC; a missing one fails compilation. */
export type IdentityHandlers = ServiceHandlers<(typeof identityv1.IdentityService)['method']>;

function requireOperator(ctx: CallContext): void {
  if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.ACCESS_DENIED, 'Operator access required');
}

function requireAgent(ctx: CallContext): Extract<Principal, { kind: 'agent' }> {
  if (ctx.principal?.kind !== 'agent') throw new HubError(Reason.ACCESS_DENIED, 'Agent credentials required');
  return ctx.principal;
}

/** Other services ask on an agent's behalf, operators for themselves; nobody asks anonymously. */
function requirePrincipal(ctx: CallContext): void {
  if (!ctx.principal) throw HubError.unauthenticated();
}

/** Builds the IdentityService handlers over the service's database and the shared Kv. */
export function createIdentityHandlers(deps: { db: Db; kv: Kv; egress?: EgressPolicy; quotas?: IdentityQuotas }): IdentityHandlers {
  const maxAgents = deps.quotas?.agentsPerTenant ?? DEFAULT_IDENTITY_QUOTAS.agentsPerTenant;
  const store = new IdentityStore(deps.db);
  const egress = deps.egress ?? egressPolicy(false);
  return {
    async createTenant(req, ctx) {
      requireOperator(ctx);
      const id = valid.tenantId(req.tenantId);
      return createTenant(store, ctx.signal, id, valid.tenantName(req.name, id));
    },

    async listTenants(_req, ctx) {
      requireOperator(ctx);
      return { tenants: await listTenants(store, ctx.signal) };
    },

    async getTenantLimits(req, ctx) {
      const tenantId = valid.tenantId(req.tenantId);
      const own = ctx.principal?.kind === 'agent' && ctx.principal.tenantId === tenantId;
      if (!own) requireOperator(ctx);
      return { limits: await getTenantLimits(store, ctx.signal, tenantId) };
    },

    async getTenantUsage(req, ctx) {
      requireOperator(ctx);
      return { usage: await getTenantUsage(store, ctx.signal, valid.tenantId(req.tenantId), maxAgents) };
    },

    async setTenantLimits(req, ctx) {
      requireOperator(ctx);
      return { limits: await setTenantLimits(store, ctx.signal, valid.tenantId(req.tenantId), req.limits) };
    },

    async createAgent(req, ctx) {
      requireOperator(ctx);
      const input = {
        tenantId: valid.tenantId(req.tenantId),
        name: valid.agentName(req.name),
        agentId: req.agentId === '' ? undefined : valid.agentId(req.agentId),
        endpointUrl: valid.endpointUrl(req.endpointUrl),
        outputModes: valid.outputModes(req.outputModes),
        description: valid.description(req.description),
        skills: valid.skills(req.skills),
        createTenant: req.createTenant,
      };
      // The push worker checks again at every send (DNS may change); this refuses a plain mistake early.
      if (input.endpointUrl) await checkTargetUrl(input.endpointUrl, 'endpoint_url', egress);
      return createAgent(store, ctx.signal, input, maxAgents);
    },

    async getAgent(req, ctx) {
      requirePrincipal(ctx);
      return { agent: await getAgent(store, ctx.signal, valid.agentId(req.agentId)) };
    },

    async listAgents(req, ctx) {
      requireOperator(ctx);
      const tenantId = req.tenantId === '' ? undefined : valid.tenantId(req.tenantId);
      return { agents: await listAgents(store, ctx.signal, tenantId) };
    },

    async createApiKey(req, ctx) {
      requireOperator(ctx);
      return createApiKey(store, ctx.signal, valid.agentId(req.agentId));
    },

    async rotatePushSecret(req, ctx) {
      requireOperator(ctx);
      return { pushSecret: await rotatePushSecret(store, ctx.signal, valid.agentId(req.agentId)) };
    },

    async getPushCredential(req, ctx) {
      requireOperator(ctx);
      return { pushSecret: await pushCredential(store, ctx.signal, valid.agentId(req.agentId)) };
    },

    async revokeApiKey(req, ctx) {
      requireOperator(ctx);
      return { key: await revokeApiKey(store, ctx.signal, deps.kv, valid.generatedId(req.keyId, 'key_id')) };
    },

    async listApiKeys(req, ctx) {
      requireOperator(ctx);
      return { keys: await listApiKeys(store, ctx.signal, valid.agentId(req.agentId)) };
    },

    // The gateway calls this before it knows who the caller is, so no principal is needed.
    async authenticate(req, ctx) {
      return { principal: await authenticate(store, ctx.signal, req.apiKey) };
    },

    async requestGrant(req, ctx) {
      const caller = requireAgent(ctx);
      return requestGrant(store, ctx.signal, caller, valid.agentId(req.agentId));
    },

    async approveGrant(req, ctx) {
      const caller = requireAgent(ctx);
      return { grant: await approveGrant(store, ctx.signal, caller.agentId, valid.generatedId(req.grantId, 'grant_id')) };
    },

    async revokeGrant(req, ctx) {
      const caller = requireAgent(ctx);
      return { grant: await revokeGrant(store, ctx.signal, caller.agentId, valid.generatedId(req.grantId, 'grant_id')) };
    },

    async listGrants(req, ctx) {
      const caller = requireAgent(ctx);
      return listGrants(store, ctx.signal, caller.agentId, { status: valid.grantStatusFilter(req.status), pageSize: req.pageSize, pageToken: req.pageToken });
    },

    async checkGrant(req, ctx) {
      requirePrincipal(ctx);
      return checkGrant(store, ctx.signal, valid.agentId(req.agentId), valid.agentId(req.otherAgentId, 'other_agent_id'));
    },
  };
}
