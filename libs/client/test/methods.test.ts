import { z } from 'zod';
import { agentMethods } from '@agenthub/gateway';
import { METHODS, parseSse, HubRpcError, type MethodName, type ParamsOf } from '@agenthub/client';

describe('client method table', () => {
  // The gateway's table, enumerated without services: only names and kinds are read.
  const gateway = agentMethods(new Map());

  it('has every method of the gateway, each a stream exactly where the gateway streams', () => {
    const theirs = Object.fromEntries([...gateway].map(([name, method]) => [name, { stream: method.stream !== undefined }]));
    expect(METHODS).toEqual(theirs);
  });
});

describe('parseSse', () => {
  async function* chunks(...parts: string[]) {
    for (const part of parts) yield new TextEncoder().encode(part);
  }

  it('reads ids, multi-line data and comments across chunk boundaries, LF or CRLF', async () => {
    const events = [];
    for await (const event of parseSse(chunks(': keep-alive\n\nid: 7\ndata: {"a"', ':1}\n\nid: 7.0\r', '\ndata: x\r\ndata: y\r\n\r\n'))) events.push(event);
    expect(events).toEqual([
      { id: '7', data: '{"a":1}' },
      { id: '7.0', data: 'x\ny' },
    ]);
  });
});

describe('HubRpcError', () => {
  it('carries code, reason, field and whether a retry can pass', () => {
    const refused = new HubRpcError({ code: -32602, message: 'Invalid params: name is required', data: { reason: 'invalid_params', field: 'name' } }, 200);
    expect([refused.code, refused.reason, refused.field, refused.retryable]).toEqual([-32602, 'invalid_params', 'name', false]);
    const limited = new HubRpcError({ code: -32029, message: 'Rate limit exceeded', data: { retry_after_ms: 1500 } }, 429);
    expect([limited.retryable, limited.retryAfterMs]).toEqual([true, 1500]);
  });
});

type KeysOf<T> = T extends unknown ? keyof T : never;
/** Every param key of a method's client type, no more (the compiler checks both ways). */
type KeySet<M extends MethodName> = { [K in KeysOf<ParamsOf<M>> & string]: true };

/**
 * The params of each method whose gateway entry has a params schema (every method has one). Object literals: the compiler refuses a key the client's type lacks, and a missing one.
 */
const CLIENT_PARAMS: { [M in MethodName]?: KeySet<M> } = {
  'x-hub/workspace.create': { name: true, description: true },
  'x-hub/workspace.get': { workspace_id: true },
  'x-hub/workspace.list': {},
  'x-hub/workspace.delete': { workspace_id: true },
  'x-hub/workspace.members.add': { workspace_id: true, agent_id: true, role: true },
  'x-hub/workspace.members.remove': { workspace_id: true, agent_id: true },
  'x-hub/workspace.members.list': { workspace_id: true },
  'x-hub/workspace.types': {},
  'x-hub/workspace.store': { workspace_id: true, content: true, type: true, tags: true },
  'x-hub/workspace.query': { workspace_id: true, type: true, tags: true, tag_match: true, created_after: true, created_before: true, query: true, limit: true, threshold: true },
  'x-hub/workspace.update': { workspace_id: true, id: true, content: true, tags: true },
  'x-hub/workspace.forget': { workspace_id: true, type: true, tags: true, tag_match: true, created_after: true, created_before: true, id: true, query: true, limit: true, threshold: true, dry_run: true },
  'x-hub/workspace.memories': { workspace_id: true, type: true, tags: true, tag_match: true, created_after: true, created_before: true, limit: true, offset: true },
  'x-hub/grants.request': { agent_id: true },
  'x-hub/grants.approve': { grant_id: true },
  'x-hub/grants.revoke': { grant_id: true },
  'x-hub/grants.list': { status: true, page_size: true, page_token: true },
  'x-hub/agents.get': { agent_id: true },
  'x-hub/workspace.secrets.set': { workspace_id: true, key: true, value: true },
  'x-hub/workspace.secrets.get': { workspace_id: true, key: true },
  'x-hub/workspace.secrets.list': { workspace_id: true },
  'x-hub/workspace.secrets.delete': { workspace_id: true, key: true },
  'x-hub/webhooks.create': { workspace_id: true, scope: true, url: true, events: true, description: true },
  'x-hub/webhooks.list': { workspace_id: true, scope: true },
  'x-hub/webhooks.get': { workspace_id: true, scope: true, webhook_id: true },
  'x-hub/webhooks.delete': { workspace_id: true, scope: true, webhook_id: true },
  'x-hub/webhooks.rotate_secret': { workspace_id: true, scope: true, webhook_id: true },
  'x-hub/webhooks.test': { workspace_id: true, scope: true, webhook_id: true },
  'x-hub/webhooks.deliveries': { workspace_id: true, scope: true, webhook_id: true, limit: true, status: true },
  SendMessage: { message: true, configuration: true },
  SendStreamingMessage: { message: true, configuration: true },
  GetTask: { id: true, historyLength: true },
  CancelTask: { id: true },
  ListTasks: { contextId: true, status: true, pageSize: true, pageToken: true, historyLength: true, lastUpdatedAfter: true, includeArtifacts: true },
  SubscribeToTask: { id: true, historyLength: true },
  'x-hub/inbox.poll': { wait_ms: true, max: true },
  'x-hub/inbox.stream': { max: true },
  'x-hub/inbox.ack': { delivery_id: true },
  'x-hub/tasks.update': { task_id: true, state: true, message: true, artifacts: true },
  'x-hub/webhooks.replay': { workspace_id: true, scope: true, webhook_id: true, event_id: true, since: true },
};

describe('client params', () => {
  it('name exactly the properties of the params schema the gateway validates with', () => {
    const schemaKeys = Object.fromEntries(
      [...agentMethods(new Map())]
        .filter(([, method]) => method.params)
        .map(([name, method]) => {
          const json = z.toJSONSchema(method.params!, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, unknown> };
          return [name, Object.keys(json.properties ?? {}).sort()];
        }),
    );
    const clientKeys = Object.fromEntries(Object.entries(CLIENT_PARAMS).map(([name, keys]) => [name, Object.keys(keys!).sort()]));
    expect(clientKeys).toEqual(schemaKeys);
  });
});
