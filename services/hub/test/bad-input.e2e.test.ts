import { backends } from '@agenthub/testing';
import { openRpcDocument } from '@agenthub/gateway';
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

  it('refuses invalid agent skills with -32602 naming the field, registering no agent', async () => {
    const agents = async () => (await hub.admin('agents.list', { tenant_id: 'skills' })).agents.length;
    const good = { id: 'plan', name: 'Planning', description: 'Builds an itinerary', tags: ['trips'] };
    const refusals: [unknown, string][] = [
      [[{ ...good, id: '' }], 'skills.0.id'],
      [[good, { name: 'No id' }], 'skills.1.id'],
      [[{ ...good, name: '' }], 'skills.0.name'],
      [[{ ...good, id: 'x'.repeat(65) }], 'skills.0.id'],
      [[{ ...good, description: 'd'.repeat(2001) }], 'skills.0.description'],
      [[{ ...good, tags: Array.from({ length: 17 }, (_, i) => `t${i}`) }], 'skills.0.tags'],
      [[{ ...good, tags: 'trips' }], 'skills.0.tags'],
      [Array.from({ length: 33 }, (_, i) => ({ id: `s${i}`, name: `S${i}` })), 'skills'],
      ['plan:Planning', 'skills'],
    ];
    for (const [skills, field] of refusals) {
      const reply = await hub.call(hub.adminToken, 'agents.create', { tenant_id: 'skills', name: 'skilled', create_tenant: true, skills }, { path: '/admin' });
      expect([field, reply.status, reply.body.error?.code, reply.body.error?.data?.field]).toEqual([field, 200, -32602, field]);
    }
    const listed = await hub.call(hub.adminToken, 'agents.list', { tenant_id: 'skills' }, { path: '/admin' });
    expect(listed.body.result?.agents ?? []).toEqual([]);
    // The same registration with valid skills is accepted and its card carries them.
    const { agent } = await hub.admin('agents.create', { tenant_id: 'skills', name: 'skilled', create_tenant: true, skills: [good] });
    expect(await agents()).toBe(1);
    const card = (await (await fetch(`${hub.url}/agents/${agent.id}/.well-known/agent-card.json`)).json()) as { skills: unknown[] };
    expect(card.skills).toEqual([expect.objectContaining(good)]);
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

  /**
   * Issue 14 item 5, for every method at once: each numeric parameter docs/openrpc.json describes
   * (generated from the schemas the gateway checks with, so a new one is in here by itself), and
   * the strict endpoint's, refused with -32602 naming it just outside its range, as a fraction,
   * and far outside (3e9 overflowed an int32 into -32603; 1e300 is no int64).
   */
  it('refuses every numeric parameter outside its documented range with -32602 naming it, on every method', async () => {
    type Schema = { type?: string; minimum?: number; maximum?: number; enum?: string[]; properties?: Record<string, Schema>; anyOf?: Schema[] };
    /** An optional parameter's schema is `anyOf` it and null. */
    const bare = (s: Schema): Schema => s.anyOf?.find((option) => option.type !== 'null') ?? s;
    type Method = { name: string; params: { name: string; required: boolean; schema: Schema }[]; servers: { url: string }[] };
    /** Parameter values that pass the schema, for the parameters a method requires. */
    const filler = (name: string, given: Schema): unknown => {
      const schema = bare(given);
      if (name === 'message') return { role: 'user', parts: [{ kind: 'text', text: 'hi' }] };
      if (name === 'configuration') return { agentId: bob.agent_id };
      if (schema.enum) return schema.enum[0];
      return schema.type === 'string' ? 'x' : schema.type === 'boolean' ? false : schema.type === 'array' ? [] : schema.type === 'object' ? {} : 1;
    };
    const outside = (s: Schema) => [
      ...(s.minimum !== undefined ? [s.minimum - 1] : []),
      ...(s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER ? [s.maximum + 1] : []),
      ...(s.type === 'integer' ? [1.5] : []),
      ...(s.maximum !== undefined && s.maximum < 3e9 ? [3e9] : []),
      1e300,
    ];
    const cases: { method: string; path: string; params: Record<string, unknown>; field: string }[] = [];
    for (const method of openRpcDocument().methods as Method[]) {
      const base = Object.fromEntries(method.params.filter((p) => p.required).map((p) => [p.name, filler(p.name, p.schema)]));
      for (const param of method.params) {
        // A number at the top, or in an object parameter (configuration.historyLength).
        const schema = bare(param.schema);
        const numbers: [string[], Schema][] = schema.properties
          ? Object.entries(schema.properties).map(([key, s]) => [[param.name, key], bare(s)])
          : [[[param.name], schema]];
        for (const [keys, schema] of numbers) {
          if (schema.type !== 'integer' && schema.type !== 'number') continue;
          for (const value of outside(schema)) {
            const params: Record<string, unknown> = { ...base };
            if (keys.length === 1) params[keys[0]!] = value;
            else params[keys[0]!] = { ...(params[keys[0]!] as object), [keys[1]!]: value };
            cases.push({ method: method.name, path: method.servers[0]!.url, params, field: keys.join('.') });
          }
        }
      }
    }
    // The strict endpoint's numeric parameters (its methods are not in the OpenRPC document).
    for (const value of [-1, 101, 1.5, 3e9, 1e300]) cases.push({ method: 'ListTasks', path: strict(), params: { pageSize: value }, field: 'pageSize' });
    for (const value of [-1, 2 ** 31, 1.5, 1e300]) cases.push({ method: 'GetTask', path: strict(), params: { id: 'task_x', historyLength: value }, field: 'historyLength' });
    // Every numeric parameter is reached (a change in how schemas are written must not empty this).
    expect(new Set(cases.map((c) => `${c.path} ${c.method} ${c.field}`)).size).toBeGreaterThanOrEqual(27);

    for (const { method, path, params, field } of cases) {
      const reply = path === '/admin' ? await hub.call(hub.adminToken, method, params, { path }) : await hub.call(alice.api_key, method, params, { path, headers: A2A });
      const error = reply.body.error;
      // The strict endpoint names the field in its google.rpc.ErrorInfo.
      const named = Array.isArray(error?.data) ? error.data[0]?.metadata?.field : error?.data?.field;
      const value = field.split('.').reduce((o: any, key) => o?.[key], params);
      expect(`${path} ${method} ${field}=${value}: ${error?.code} ${named}`).toBe(`${path} ${method} ${field}=${value}: -32602 ${field}`);
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
