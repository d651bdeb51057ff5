import { z } from 'zod';
import { identityv1 } from '@agenthub/proto';
import { route, type Clients, type Route } from '../route.js';
import { field } from '../params.js';
import { agentViewFor, grantStatusOf, grantView } from '../views.js';

/** Access grants between agents of different tenants, and agent lookup (`x-hub/grants.*`). */
export function grantMethods(clients: Clients): [string, Route][] {
  const id = identityv1.IdentityService;
  return [
    ['x-hub/grants.request', route(clients, id, 'requestGrant', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ grant: grantView(r.grant), created: r.created }),
    })],
    ['x-hub/grants.approve', route(clients, id, 'approveGrant', {
      params: z.object({ grant_id: field.id }),
      request: (p) => ({ grantId: p.grant_id }),
      result: (r) => ({ grant: grantView(r.grant) }),
    })],
    ['x-hub/grants.revoke', route(clients, id, 'revokeGrant', {
      params: z.object({ grant_id: field.id }),
      request: (p) => ({ grantId: p.grant_id }),
      result: (r) => ({ grant: grantView(r.grant) }),
    })],
    ['x-hub/grants.list', route(clients, id, 'listGrants', {
      params: z.object({
        status: z.enum(['pending', 'approved', 'revoked']).optional(),
        page_size: z.number().int().min(1).max(100).optional(),
        page_token: z.string().max(256).optional(),
      }),
      request: (p) => ({ status: p.status ? grantStatusOf[p.status] : identityv1.GrantStatus.UNSPECIFIED, pageSize: p.page_size ?? 0, pageToken: p.page_token ?? '' }),
      result: (r) => ({ grants: r.grants.map(grantView), count: r.grants.length, next_page_token: r.nextPageToken || null }),
    })],
    ['x-hub/agents.get', route(clients, id, 'getAgent', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r, ctx) => ({ agent: agentViewFor(r.agent, ctx.principal) }),
    })],
  ];
}
