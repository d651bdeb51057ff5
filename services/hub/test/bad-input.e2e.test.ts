import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Issue 12 item 8: inputs that reached PostgreSQL or a decoder and came back as -32603 or HTTP 500
 * (a NUL byte in an ordinary string, a deeply nested `data` part, a malformed `pageToken`, bad
 * percent-encoding in a path) are refused as the caller's mistake, naming the field, with nothing
 * written.
 */
describe.each(backends().map((b) => [b.name, b] as const))('bad input is the caller’s mistake (%s)', (_name, backend) => {
  let hub: TestHub;
  let alice: Agent;
  let bob: Agent;
  const A2A = { 'A2A-Version': '1.0' };
  const strict = () => `/agents/${bob.agent_id}/a2a/v1`;
  const nested = (levels: number) => {
    let value: unknown = { leaf: true };
    for (let i = 0; i < levels; i++) value = { inner: value };
    return value;
  };
  /** A SendMessage whose one data part nests `levels` deep, as text (too deep for JSON.stringify). */
  const deepSend = async (path: string, levels: number, part: (data: string) => string, config: string, headers: Record<string, string> = {}) => {
    const data = `${'{"inner":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const response = await fetch(`${hub.url}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${alice.api_key}`, 'Content-Type': 'application/json', ...headers },
      body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"${path === '/a2a' ? 'user' : 'ROLE_USER'}","messageId":"deep-${levels}-${path.length}","parts":[${part(data)}]},"configuration":${config}}}`,
    });
    return { status: response.status, body: (await response.json()) as { error?: { code: number } } };
  };

  beforeAll(async () => {
    hub = await startTestHub(backend);
    alice = await hub.agent('acme', 'alice');
    bob = await hub.agent('acme', 'bob');
  });
  afterAll(() => hub?.stop());

  const counts = async () => ({
    workspaces: (await hub.ok(alice.api_key, 'x-hub/workspace.list', {})).count,
    tasks: (await hub.ok(alice.api_key, 'ListTasks', {})).totalSize,
  });

  it('refuses a NUL byte in any string with -32602 naming the field, writing nothing', async () => {
    const before = await counts();
    const { workspace } = await hub.ok(alice.api_key, 'x-hub/workspace.create', { name: 'Clean' });
    const after = await counts();
    const refusals: [string, unknown, string, string?][] = [
      ['x-hub/workspace.create', { name: 'a\u0000b' }, 'name'],
      ['x-hub/workspace.create', { name: 'ok', description: 'd\u0000' }, 'description'],
      ['x-hub/workspace.store', { workspace_id: workspace.id, content: 'remember\u0000this' }, 'content'],
      ['x-hub/workspace.get', { workspace_id: `${workspace.id}\u0000` }, 'workspace_id'],
      ['GetTask', { id: 'task\u0000' }, 'id'],
      ['SendMessage', { message: { role: 'user', messageId: 'nul-1', parts: [{ kind: 'text', text: 'hi\u0000' }] }, configuration: { agentId: bob.agent_id } }, 'message.parts[0].text'],
      ['SendMessage', { message: { role: 'user', messageId: 'nul-2', parts: [{ kind: 'data', mimeType: 'application/json', data: { k: 'v\u0000' } }] }, configuration: { agentId: bob.agent_id } }, 'message.parts[0].data.k'],
      ['SendMessage', { message: { role: 'user', messageId: 'nul-3\u0000', parts: [{ kind: 'text', text: 'hi' }] }, configuration: { agentId: bob.agent_id } }, 'message.messageId'],
      ['SendMessage', { message: { role: 'user', messageId: 'nul-4', parts: [{ kind: 'text', text: 'hi' }], metadata: { 'k\u0000': 1 } }, configuration: { agentId: bob.agent_id } }, 'message.metadata'],
    ];
    for (const [method, params, field] of refusals) {
      const reply = await hub.call(alice.api_key, method, params);
      expect([method, reply.status, reply.body.error?.code, reply.body.error?.data?.field]).toEqual([method, 200, -32602, field]);
    }
    const onStrict = await hub.call(alice.api_key, 'SendMessage', { message: { role: 'ROLE_USER', messageId: 'nul-5', parts: [{ text: 'hi\u0000' }] }, configuration: { returnImmediately: true } }, { path: strict(), headers: A2A });
    expect(onStrict.body.error?.code).toBe(-32602);
    const onAdmin = await hub.call(hub.adminToken, 'agents.create', { tenant_id: 'acme', name: 'eve\u0000' }, { path: '/admin' });
    expect(onAdmin.body.error).toMatchObject({ code: -32602, data: { field: 'name' } });
    expect(await counts()).toEqual(after);
    expect(after.workspaces).toBe(before.workspaces + 1);
  });

  it('refuses a deeply nested data part (strict endpoint) or metadata with -32602', async () => {
    const before = await counts();
    for (const levels of [100, 20_000]) {
      const viaStrict = await deepSend(strict(), levels, (data) => `{"data":${data}}`, '{"returnImmediately":true}', A2A);
      expect([levels, viaStrict.status, viaStrict.body.error?.code]).toEqual([levels, 200, -32602]);
      const viaHub = await deepSend('/a2a', levels, (data) => `{"kind":"text","text":"hi","metadata":${data}}`, `{"agentId":"${bob.agent_id}"}`);
      expect([levels, viaHub.status, viaHub.body.error?.code]).toEqual([levels, 200, -32602]);
    }
    // Nesting within the limit is an ordinary data part.
    const shallow = await hub.call(alice.api_key, 'SendMessage', { message: { role: 'ROLE_USER', messageId: 'deep-3', parts: [{ data: nested(20) }] }, configuration: { returnImmediately: true } }, { path: strict(), headers: A2A });
    expect(shallow.body).toMatchObject({ result: { task: { id: expect.any(String) } } });
    expect((await counts()).tasks).toBe(before.tasks + 1);
  });

  it('refuses a malformed pageToken with -32602 on every paginated method', async () => {
    const token = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const malformed = ['!!!', 'x', token([1e300, 'tsk_x']), token([-1, 'tsk_x']), token([1.5, 'tsk_x']), token([1, 'a\u0000b']), token([1, "'; DROP TABLE tasks; --"]), token({}), token(null)];
    for (const pageToken of malformed) {
      const viaHub = await hub.call(alice.api_key, 'ListTasks', { pageToken });
      expect([pageToken, viaHub.body.error?.code, viaHub.body.error?.data?.field]).toEqual([pageToken, -32602, 'pageToken']);
      const viaStrict = await hub.call(alice.api_key, 'ListTasks', { pageToken }, { path: strict(), headers: A2A });
      expect([pageToken, viaStrict.body.error?.code]).toEqual([pageToken, -32602]);
      const grants = await hub.call(alice.api_key, 'x-hub/grants.list', { page_token: pageToken });
      expect([pageToken, grants.body.error?.code, grants.body.error?.data?.field]).toEqual([pageToken, -32602, 'page_token']);
    }
  });

  it('answers 404 for bad percent-encoding in an agent path, never 500', async () => {
    for (const path of ['/agents/%E0%A4%A/.well-known/agent-card.json', '/agents/%/.well-known/agent-card.json', '/agents/%ZZ/.well-known/agent-card.json']) {
      const response = await fetch(`${hub.url}${path}`);
      expect([path, response.status]).toEqual([path, 404]);
    }
    for (const path of ['/agents/%E0%A4%A/a2a', '/agents/%/a2a/v1']) {
      const response = await fetch(`${hub.url}${path}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${alice.api_key}`, 'Content-Type': 'application/json', ...A2A },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }),
      });
      expect([path, response.status]).toEqual([path, 404]);
    }
    expect((await fetch(`${hub.url}/readyz`)).status).toBe(200);
  });
});
