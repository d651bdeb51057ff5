import type { Clients, Route } from '../route.js';
import { grantMethods } from './grants.js';
import { memoryMethods } from './memories.js';
import { messagingMethods } from './messaging.js';
import type { StreamOptions } from './messaging-streams.js';
import { secretMethods } from './secrets.js';
import { webhookMethods } from './webhooks.js';
import { workspaceMethods } from './workspaces.js';

/**
 * The agent-facing JSON-RPC methods of `POST /a2a` and `POST /agents/{agentId}/a2a`, each
 * forwarded to one RPC, one file per area. Names and result shapes follow the interface
 * specification; where it gives no shape, the README documents ours.
 */
export function agentMethods(clients: Clients, options: StreamOptions = {}): Map<string, Route> {
  return new Map<string, Route>([...workspaceMethods(clients), ...memoryMethods(clients), ...grantMethods(clients), ...secretMethods(clients), ...messagingMethods(clients, options), ...webhookMethods(clients)]);
}
