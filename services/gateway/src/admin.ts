import { z } from 'zod';
import { eventsv1, identityv1, messagingv1, secretsv1, workspacev1 } from '@agenthub/proto';
import { route, type Clients, type Route } from './route.js';
import { field, parseParams } from './params.js';
import { agentView, keyView, tenantView } from './views.js';

/** An agent as the operator sees it, with what its A2A Agent Card advertises. */
function agentWithCard(a: identityv1.Agent | undefined) {
  const view = agentView(a);
  return view && a ? { ...view, description: a.description, skills: a.skills.map((s) => ({ id: s.id, name: s.name, description: s.description, tags: s.tags })) } : view;
}

type UsageRow = { quota: string; scope: string; used: bigint; limit: bigint };

/**
 * Every quota of a tenant, each asked of the service owning it: identity (its agents, whose ids
 * the others need), workspace (its workspaces, their memories and members), then secrets, events
 * and messaging for those workspaces and agents, which they cannot list by tenant themselves.
 */
function tenantUsage(clients: Clients): Route {
  const params = z.object({ tenant_id: z.string().min(1).max(63) });
  const client = (service: { typeName: string }) => {
    const found = clients.get(service.typeName);
    if (!found) throw new Error(`No client for ${service.typeName}`);
    return found;
  };
  return {
    service: workspacev1.WorkspaceService as unknown as Route['service'],
    rpc: 'getTenantUsage',
    params,
    async invoke(raw, ctx) {
      const tenantId = parseParams(params, raw).tenant_id;
      const options = { principal: ctx.principal, signal: ctx.signal };
      const ask = async (service: { typeName: string }, rpc: string, request: unknown) =>
        ((await client(service)[rpc]!(request, options)) as { usage: UsageRow[] }).usage;
      const agents = await ask(identityv1.IdentityService, 'getTenantUsage', { tenantId });
      const { agents: list } = (await client(identityv1.IdentityService).listAgents!({ tenantId }, options)) as { agents: { id: string }[] };
      const workspaces = await ask(workspacev1.WorkspaceService, 'getTenantUsage', { tenantId });
      const agentIds = list.map((a) => a.id);
      const workspaceIds = [...new Set(workspaces.filter((u) => u.scope).map((u) => u.scope))];
      const rest = await Promise.all([
        ask(secretsv1.SecretsService, 'getWorkspacesUsage', { workspaceIds }),
        ask(eventsv1.EventsService, 'getUsage', { workspaceIds, agentIds }),
        ask(messagingv1.MessagingService, 'getAgentsUsage', { agentIds, tenantId }),
      ]);
      const usage = [...agents, ...workspaces, ...rest.flat()];
      return { usage: usage.map((u) => ({ quota: u.quota, scope: u.scope, used: Number(u.used), limit: Number(u.limit) })) };
    },
  };
}

/**
 * Operator methods of `POST /admin`, authorised by the operator token instead of an API key.
 * The `agenthub` command is their client.
 */
export function adminMethods(clients: Clients): Map<string, Route> {
  const id = identityv1.IdentityService;
  return new Map<string, Route>([
    ['tenants.create', route(clients, id, 'createTenant', {
      params: z.object({ tenant_id: z.string().min(1).max(63), name: z.string().max(200).optional() }),
      request: (p) => ({ tenantId: p.tenant_id, name: p.name ?? '' }),
      result: (r) => ({ tenant: tenantView(r.tenant), created: r.created }),
    })],
    ['tenants.list', route(clients, id, 'listTenants', {
      params: z.object({}),
      request: () => ({}),
      result: (r) => ({ tenants: r.tenants.map(tenantView) }),
    })],
    ['agents.create', route(clients, id, 'createAgent', {
      params: z.object({
        tenant_id: z.string().min(1).max(63),
        name: z.string().trim().min(1).max(200),
        agent_id: field.agentId.optional(),
        endpoint_url: z.string().max(2048).optional(),
        output_modes: z.array(z.string().max(255)).max(32).optional(),
        create_tenant: z.boolean().optional(),
        description: z.string().max(2000).optional(),
        skills: z
          .array(z.object({ id: z.string().min(1).max(64), name: z.string().min(1).max(200), description: z.string().max(2000).optional(), tags: z.array(z.string().max(200)).max(16).optional() }))
          .max(32)
          .optional(),
      }),
      request: (p) => ({
        tenantId: p.tenant_id,
        name: p.name,
        agentId: p.agent_id ?? '',
        endpointUrl: p.endpoint_url ?? '',
        outputModes: p.output_modes ?? [],
        createTenant: p.create_tenant ?? false,
        description: p.description ?? '',
        skills: (p.skills ?? []).map((skill) => ({ id: skill.id, name: skill.name, description: skill.description ?? '', tags: skill.tags ?? [] })),
      }),
      result: (r) => ({
        agent: agentWithCard(r.agent),
        key: keyView(r.key),
        api_key: r.apiKey,
        tenant_created: r.tenantCreated,
        ...(r.pushSecret ? { push_secret: r.pushSecret } : {}),
      }),
    })],
    // A push agent's new push secret (the credential the hub presents to its endpoint), shown once.
    ['agents.rotate_push_secret', route(clients, id, 'rotatePushSecret', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ push_secret: r.pushSecret }),
    })],
    ['agents.get', route(clients, id, 'getAgent', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ agent: agentWithCard(r.agent) }),
    })],
    ['agents.list', route(clients, id, 'listAgents', {
      params: z.object({ tenant_id: z.string().max(63).optional() }),
      request: (p) => ({ tenantId: p.tenant_id ?? '' }),
      result: (r) => ({ agents: r.agents.map(agentWithCard) }),
    })],
    ['keys.create', route(clients, id, 'createApiKey', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ key: keyView(r.key), api_key: r.apiKey }),
    })],
    ['keys.revoke', route(clients, id, 'revokeApiKey', {
      params: z.object({ key_id: field.id }),
      request: (p) => ({ keyId: p.key_id }),
      result: (r) => ({ key: keyView(r.key) }),
    })],
    ['keys.list', route(clients, id, 'listApiKeys', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ keys: r.keys.map(keyView) }),
    })],
    // Secrets key management: rewrap every data key under the newest KEK; re-seal one workspace.
    ['secrets.rotate_kek', route(clients, secretsv1.SecretsService, 'rotateKek', {
      params: z.object({}),
      request: () => ({}),
      result: (r) => ({ kek_version: r.kekVersion, rewrapped: r.rewrapped, failed: r.failed, total: r.total }),
    })],
    ['secrets.rotate_workspace_key', route(clients, secretsv1.SecretsService, 'rotateWorkspaceKey', {
      params: z.object({ workspace_id: field.workspaceId }),
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ workspace_id: r.workspaceId, generation: r.generation, resealed: r.resealed }),
    })],
    // A tenant's use of its quotas (`agenthub tenants usage`).
    ['tenants.usage', tenantUsage(clients)],
    // Memories: move a workspace to the configured embedding model. Each call works until its
    // deadline nears and reports what remains; `agenthub memories reembed` calls until none does.
    ['memories.reembed', route(clients, workspacev1.WorkspaceService, 'reembedWorkspace', {
      params: z.object({ workspace_id: field.workspaceId, model: z.string().min(1).max(200).optional() }),
      request: (p) => ({ workspaceId: p.workspace_id, model: p.model ?? '' }),
      result: (r) => ({
        workspace_id: r.workspaceId,
        model: r.model,
        dimensions: r.dimensions,
        reembedded: r.reembedded,
        remaining: r.remaining,
        dropped_models: r.droppedModels,
      }),
    })],
  ]);
}
