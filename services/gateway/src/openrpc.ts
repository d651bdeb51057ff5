import { z } from 'zod';
import { adminMethods } from './admin.js';
import { agentMethods } from './methods/index.js';
import type { Route } from './route.js';

/**
 * The machine-readable description of the JSON-RPC methods (OpenRPC 1.3), generated from the params
 * schemas the gateway checks requests against and from its method tables, so it cannot drift from
 * what the gateway accepts. `npm run openrpc` writes it to docs/openrpc.json; a test fails when the
 * checked-in file differs. Results, errors and semantics are in docs/protocol.md.
 */

const STREAMING_NOTE = 'Answered as a Server-Sent Events stream of JSON-RPC responses (docs/protocol.md, Streams).';

function methodEntry(name: string, route: Route, server: string) {
  if (!route.params) throw new Error(`Method ${name} has no params schema`);
  const schema = z.toJSONSchema(route.params, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  delete schema.$schema;
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  return {
    name,
    summary: `Forwarded to ${route.service.typeName}.${route.rpc}`,
    ...(route.stream ? { description: STREAMING_NOTE } : {}),
    paramStructure: 'by-name',
    params: Object.entries(properties).map(([param, s]) => ({ name: param, required: required.has(param), schema: s })),
    result: { name: 'result', schema: {} },
    servers: [{ name: server, url: server }],
  };
}

/** The description of the agent endpoint (`/a2a`, `/agents/{agentId}/a2a`) and the operator endpoint (`/admin`). */
export function openRpcDocument(): Record<string, unknown> {
  const none = new Map();
  const agent = [...agentMethods(none)].map(([name, route]) => methodEntry(name, route, '/a2a'));
  const admin = [...adminMethods(none)].map(([name, route]) => methodEntry(name, route, '/admin'));
  return {
    openrpc: '1.3.2',
    info: {
      title: 'AgentHub JSON-RPC',
      version: '1.0.0',
      description: 'Methods of POST /a2a and POST /agents/{agentId}/a2a (API key) and of POST /admin (operator token). The strict A2A 1.0 endpoint (/agents/{agentId}/a2a/v1) follows A2A 1.0; see docs/a2a.md.',
    },
    servers: [
      { name: 'agent', url: '/a2a' },
      { name: 'admin', url: '/admin' },
    ],
    methods: [...agent, ...admin].sort((a, b) => a.name.localeCompare(b.name)),
  };
}
