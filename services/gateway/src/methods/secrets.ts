import { z } from 'zod';
import { secretsv1 } from '@agenthub/proto';
import { route, type Clients, type Route } from '../route.js';
import { field } from '../params.js';

/** int64 timestamps arrive as bigint; epoch milliseconds fit a JSON number exactly. */
const ms = (value: bigint | undefined) => Number(value ?? 0n);

// Shapes only: the secrets service checks the key's syntax and the value's size, and names the
// field, without echoing the value.
const key = z.string();
const value = z.string();

/**
 * Workspace secrets (`x-hub/workspace.secrets.*`), forwarded to the secrets service, which asks
 * the workspace service for the caller's role on every call. Values appear only in `get`'s result.
 */
export function secretMethods(clients: Clients): [string, Route][] {
  const secrets = secretsv1.SecretsService;
  return [
    ['x-hub/workspace.secrets.set', route(clients, secrets, 'setSecret', {
      params: z.object({ workspace_id: field.workspaceId, key, value }),
      request: (p) => ({ workspaceId: p.workspace_id, key: p.key, value: p.value }),
      result: (r) => ({
        key: r.secret?.key,
        created: r.created,
        created_at: ms(r.secret?.createdAt),
        updated_at: ms(r.secret?.updatedAt),
      }),
    })],
    ['x-hub/workspace.secrets.get', route(clients, secrets, 'getSecret', {
      params: z.object({ workspace_id: field.workspaceId, key }),
      request: (p) => ({ workspaceId: p.workspace_id, key: p.key }),
      result: (r) => ({
        key: r.secret?.key,
        value: r.value,
        created_at: ms(r.secret?.createdAt),
        updated_at: ms(r.secret?.updatedAt),
      }),
      grouped: true,
    })],
    ['x-hub/workspace.secrets.list', route(clients, secrets, 'listSecrets', {
      params: z.object({ workspace_id: field.workspaceId }),
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({
        keys: r.secrets.map((s) => ({ key: s.key, created_at: ms(s.createdAt), updated_at: ms(s.updatedAt) })),
        count: r.secrets.length,
      }),
    })],
    ['x-hub/workspace.secrets.delete', route(clients, secrets, 'deleteSecret', {
      params: z.object({ workspace_id: field.workspaceId, key }),
      request: (p) => ({ workspaceId: p.workspace_id, key: p.key }),
      result: (r) => ({ deleted: true, workspace_id: r.workspaceId, key: r.key }),
    })],
  ];
}
