import { createHash } from 'node:crypto';
import { identityv1 } from '@agenthub/proto';
import { HubError, Reason, type CallOptions } from '@agenthub/runtime';
import type { Json } from '../fields.js';

/**
 * A2A 1.0 Agent Cards: each agent's, at `/agents/{agentId}/.well-known/agent-card.json`,
 * advertising the strict endpoint for that agent; and the hub's own, at
 * `/.well-known/agent-card.json`. Cards need no API key: they carry the registration's name,
 * description, output modes and skills, never the push endpoint or the tenant.
 */

/** Media types a card advertises when the registration names none. */
const DEFAULT_MODES = ['text/plain', 'application/json'];
/**
 * Clients may reuse a card this long, then revalidate with its ETag. A card built from the
 * configured public URL is the same for everyone, so shared caches may keep it; one built from
 * the request's Host is not, and only the client that asked may.
 */
const CACHE_FOR = 'max-age=300';
const CARD_VERSION = '1.0.0';

const SECURITY = {
  securitySchemes: {
    apiKey: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'AgentHub API key', description: 'An API key the hub operator issued to the calling agent (agenthub agents create / keys create).' } },
  },
  securityRequirements: [{ schemes: { apiKey: { list: [] } } }],
};

/** The strict A2A 1.0 JSON-RPC endpoint of an agent. */
export const strictEndpoint = (baseUrl: string, agentId: string) => `${baseUrl}/agents/${encodeURIComponent(agentId)}/a2a/v1`;

export function agentCard(agent: identityv1.Agent, baseUrl: string): Json {
  const description = agent.description || `${agent.name}, an agent reached through AgentHub`;
  const skills = agent.skills.length
    ? agent.skills.map((s) => ({ id: s.id, name: s.name, description: s.description || s.name, tags: s.tags.length ? s.tags : ['agenthub'] }))
    : [{ id: 'messages', name: agent.name, description: `Send ${agent.name} a message; it answers with a task.`, tags: ['agenthub'] }];
  return {
    name: agent.name,
    description,
    supportedInterfaces: [{ url: strictEndpoint(baseUrl, agent.id), protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    provider: { organization: 'AgentHub', url: baseUrl },
    version: CARD_VERSION,
    capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
    ...SECURITY,
    defaultInputModes: DEFAULT_MODES,
    defaultOutputModes: agent.outputModes.length ? agent.outputModes : DEFAULT_MODES,
    skills,
  };
}

/**
 * The hub's card describes the hub. It lists no interface of its own: the hub is not an agent one
 * talks to, and `/a2a` speaks the interface's dialect, which standard clients do not. Each agent's
 * card names its strict endpoint.
 */
export function hubCard(baseUrl: string): Json {
  return {
    name: 'AgentHub',
    description:
      'A hub through which agents message each other and share workspaces. Each registered agent has an A2A 1.0 Agent Card at /agents/{agentId}/.well-known/agent-card.json naming its JSON-RPC endpoint; callers authenticate with an AgentHub API key.',
    supportedInterfaces: [],
    provider: { organization: 'AgentHub', url: baseUrl },
    version: CARD_VERSION,
    capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
    ...SECURITY,
    defaultInputModes: DEFAULT_MODES,
    defaultOutputModes: DEFAULT_MODES,
    skills: [{ id: 'relay', name: 'Agent messaging', description: 'Relays A2A messages and tasks between registered agents, connected or pushed to.', tags: ['agenthub', 'a2a'] }],
  };
}

export interface CardResponse {
  status: 200 | 304;
  headers: Record<string, string>;
  body?: Json;
}

/**
 * The card with a strong ETag (a digest of its bytes); a matching If-None-Match gets 304. `vary`
 * names the request headers the card's links were read from (none when configured).
 */
export function cardResponse(card: Json, ifNoneMatch: string | undefined, vary: readonly string[] = []): CardResponse {
  const etag = `"${createHash('sha256').update(JSON.stringify(card)).digest('base64url').slice(0, 32)}"`;
  const headers: Record<string, string> = { ETag: etag, 'Cache-Control': `${vary.length ? 'private' : 'public'}, ${CACHE_FOR}` };
  if (vary.length) headers.Vary = vary.join(', ');
  const matches = ifNoneMatch?.split(',').map((t) => t.trim()).some((t) => t === '*' || t === etag || t === `W/${etag}`);
  return matches ? { status: 304, headers } : { status: 200, headers, body: card };
}

type GetAgent = (request: { agentId: string }, options: CallOptions) => Promise<identityv1.GetAgentResponse>;

/**
 * Looks the agent up as the gateway itself (the operator principal): cards are public, and the
 * caller, who may have no key, is not the one asking identity.
 */
export function agentCards(getAgent: GetAgent) {
  return async (agentId: string, baseUrl: string, signal?: AbortSignal): Promise<Json | undefined> => {
    try {
      const { agent } = await getAgent({ agentId }, { principal: { kind: 'operator' }, signal });
      return agent ? agentCard(agent, baseUrl) : undefined;
    } catch (err) {
      // An id identity cannot even parse names no agent either.
      if (err instanceof HubError && (err.reason === Reason.NOT_FOUND || err.reason === Reason.INVALID_PARAMS)) return undefined;
      throw err;
    }
  };
}
