import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * The MUST requirements of the A2A TCK (a2aproject/a2a-tck, `tck/requirements/`) that apply to
 * the JSON-RPC binding, checked on the hub's strict endpoint with raw HTTP, so the wire shapes
 * themselves are what is asserted. Each test is named after its requirement. The recipient is a
 * connected agent that answers by calling `x-hub/tasks.update` when a test says so.
 */

const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';

interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

let nextId = 1;
let nextMessage = 1;
const text = (value: string) => ({ text: value });
const message = (parts: unknown[] = [text('Hello from the TCK')], extra: Record<string, unknown> = {}) => ({
  role: 'ROLE_USER',
  parts,
  messageId: `tck-${nextMessage++}`,
  ...extra,
});

// The A2A requirements hold on every backend and in split mode, not only on the embedded one.
describe.each(hubModes().map((m) => [m.name, m] as const))('A2A TCK, JSON-RPC binding (%s)', (_name, backend) => {
  let hub: TestHub;
  let client: Agent;
  let agent: Agent;
  let endpoint: string;

  beforeAll(async () => {
    hub = await startTestHub(backend, { MESSAGING_BLOCKING_MS: '10000' });
    client = await hub.agent('tck', 'client');
    const created = await hub.admin('agents.create', {
      tenant_id: 'tck',
      name: 'SUT',
      create_tenant: true,
      output_modes: ['text/plain', 'application/json'],
      description: 'The system under test',
      skills: [{ id: 'echo', name: 'Echo', description: 'Says it back', tags: ['test'] }],
    });
    agent = { agent_id: created.agent.id, tenant_id: 'tck', api_key: created.api_key, key_id: created.key.id };
    endpoint = `${hub.url}/agents/${agent.agent_id}/a2a/v1`;
  });
  afterAll(async () => {
    await hub?.stop();
  });

  async function post(body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${client.api_key}`, 'A2A-Version': '1.0', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: response.status, headers: response.headers, body: await response.json() };
  }
  const rpc = (method: string, params: unknown, headers?: Record<string, string>) => post({ jsonrpc: '2.0', id: nextId++, method, params }, headers);
  async function ok(method: string, params: unknown) {
    const reply = await rpc(method, params);
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  }
  /** A new task, left as submitted. */
  const submitted = async (parts?: unknown[]) => (await ok('SendMessage', { message: message(parts), configuration: { returnImmediately: true } })).task;
  /** The recipient moves its task (the interface's dialect). */
  const update = (taskId: string, state: string, extra: Record<string, unknown> = {}) => hub.ok(agent.api_key, 'x-hub/tasks.update', { task_id: taskId, state, ...extra });
  const completed = async () => {
    const task = await submitted();
    await update(task.id, 'completed', { artifacts: [{ name: 'answer', parts: [{ kind: 'text', text: '42' }] }] });
    return task;
  };

  /** Opens a stream; the SSE events are read once the stream has ended. */
  async function stream(method: string, params: unknown) {
    const id = nextId++;
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: `Bearer ${client.api_key}`, 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
    });
    return {
      id,
      response,
      async events(): Promise<{ id?: string; data: any }[]> {
        const body = await response.text();
        return body
          .split('\n\n')
          .filter((chunk) => chunk.includes('data: '))
          .map((chunk) => {
            const lines = chunk.split('\n');
            const eventId = lines.find((l) => l.startsWith('id: '))?.slice(4);
            return { ...(eventId ? { id: eventId } : {}), data: JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) };
          });
      },
    };
  }

  function expectA2aError(reply: Reply, code: number, reason: string) {
    expect(reply.body).toMatchObject({ jsonrpc: '2.0', error: { code, message: expect.any(String) } });
    expect(reply.body.error.data).toEqual([expect.objectContaining({ '@type': ERROR_INFO, reason, domain: 'a2a-protocol.org' })]);
  }

  describe('Agent Card', () => {
    it('CARD-DISC-001: MUST publish the Agent Card at the well-known path, with no credentials needed', async () => {
      const response = await fetch(`${hub.url}/agents/${agent.agent_id}/.well-known/agent-card.json`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      const card = await response.json();
      expect(card).toMatchObject({
        name: 'SUT',
        description: 'The system under test',
        version: expect.any(String),
        supportedInterfaces: [{ url: endpoint, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
        capabilities: { streaming: true, pushNotifications: true },
        defaultInputModes: ['text/plain', 'application/json'],
        defaultOutputModes: ['text/plain', 'application/json'],
        skills: [{ id: 'echo', name: 'Echo', description: 'Says it back', tags: ['test'] }],
        securitySchemes: { apiKey: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
      });
      expect(JSON.stringify(card)).not.toContain('tck');
    });

    it('CARD-CACHE-001: MUST answer a matching If-None-Match with 304 and a strong ETag', async () => {
      const url = `${hub.url}/agents/${agent.agent_id}/.well-known/agent-card.json`;
      const first = await fetch(url);
      const etag = first.headers.get('etag')!;
      expect(etag).toMatch(/^"[^"]+"$/);
      expect(first.headers.get('cache-control')).toMatch(/max-age=\d+/);
      const again = await fetch(url, { headers: { 'If-None-Match': etag } });
      expect(again.status).toBe(304);
      expect(again.headers.get('etag')).toBe(etag);
    });

    it('an agent registered without skills gets a default skill; an unknown agent has no card (404)', async () => {
      const card = (await (await fetch(`${hub.url}/agents/${client.agent_id}/.well-known/agent-card.json`)).json()) as any;
      expect(card.skills).toEqual([expect.objectContaining({ id: expect.any(String), name: 'client', tags: expect.any(Array) })]);
      expect(card.defaultOutputModes).toEqual(['text/plain', 'application/json']);
      expect((await fetch(`${hub.url}/agents/agt_nobody/.well-known/agent-card.json`)).status).toBe(404);
    });

    it('the hub publishes its own card at /.well-known/agent-card.json', async () => {
      const response = await fetch(`${hub.url}/.well-known/agent-card.json`);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ name: 'AgentHub', capabilities: { pushNotifications: false } });
    });
  });

  describe('SendMessage', () => {
    it('CORE-SEND-001: MUST return a Task or a Message', async () => {
      const reply = await rpc('SendMessage', { message: message(), configuration: { returnImmediately: true } });
      expect(reply.body.result).toEqual({ task: expect.objectContaining({ id: expect.any(String), contextId: expect.any(String), status: expect.any(Object) }) });
    });

    it('CORE-EXECUTION-MODE-002: MUST return at once, with the task in progress, when returnImmediately is true', async () => {
      const task = await submitted();
      expect(task.status).toEqual({ state: 'TASK_STATE_SUBMITTED', timestamp: expect.any(String) });
      expect(task.history).toEqual([{ messageId: expect.any(String), contextId: task.contextId, taskId: task.id, role: 'ROLE_USER', parts: [{ text: 'Hello from the TCK', mediaType: 'text/plain' }] }]);
    });

    it('CORE-EXECUTION-MODE-001: MUST wait for a terminal or interrupted state when returnImmediately is unset', async () => {
      const pending = ok('SendMessage', { message: message([text('Blocking request')]) });
      let delivery: any;
      while (!delivery) {
        const { deliveries } = await hub.ok(agent.api_key, 'x-hub/inbox.poll', { wait_ms: 1000, max: 100 });
        delivery = deliveries.find((d: any) => d.message.parts[0].text === 'Blocking request');
      }
      await update(delivery.task_id, 'input-required', { message: { role: 'agent', parts: [{ kind: 'text', text: 'Which one?' }] } });
      const { task } = await pending;
      expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
      expect(task.history.at(-1)).toMatchObject({ role: 'ROLE_AGENT', parts: [{ text: 'Which one?' }] });
    });

    it('CORE-SEND-002: MUST return UnsupportedOperationError (-32004) for a message to a task in a terminal state', async () => {
      const task = await completed();
      expectA2aError(await rpc('SendMessage', { message: message([text('More?')], { taskId: task.id }) }), -32004, 'UNSUPPORTED_OPERATION');
    });

    it('CORE-MULTI-001a / CORE-MULTI-003: MUST generate a unique taskId and include the generated contextId', async () => {
      const [a, b] = [await submitted(), await submitted()];
      expect(a.id).not.toBe(b.id);
      expect(a.contextId).toEqual(expect.any(String));
      expect(a.contextId).not.toBe('');
    });

    it('CORE-MULTI-004: MUST return TaskNotFoundError (-32001) for a message naming an unknown taskId', async () => {
      expectA2aError(await rpc('SendMessage', { message: message(undefined, { taskId: 'task_nonexistent' }) }), -32001, 'TASK_NOT_FOUND');
    });

    it('CORE-MULTI-005: MUST infer the contextId from the task when only taskId is given', async () => {
      const task = await submitted();
      await update(task.id, 'input-required');
      const { task: continued } = await ok('SendMessage', { message: message([text('Answer')], { taskId: task.id }), configuration: { returnImmediately: true } });
      expect(continued).toMatchObject({ id: task.id, contextId: task.contextId });
    });

    it('CORE-MULTI-006: MUST reject a contextId that does not match the task named by taskId', async () => {
      const task = await submitted();
      await update(task.id, 'input-required');
      const reply = await rpc('SendMessage', { message: message([text('Answer')], { taskId: task.id, contextId: 'ctx_other' }) });
      expectA2aError(reply, -32602, 'INVALID_PARAMS');
      expect(reply.body.error.data[0].metadata).toEqual({ field: 'message.contextId' });
    });

    it('CORE-ERR-002: MUST validate input parameters (a message without messageId is -32602 naming the field)', async () => {
      const reply = await rpc('SendMessage', { message: { role: 'ROLE_USER', parts: [text('x')] } });
      expectA2aError(reply, -32602, 'INVALID_PARAMS');
      expect(reply.body.error.message).toContain('message.messageId');
      expectA2aError(await rpc('SendMessage', { message: message([{ mediaType: 'text/plain' }]) }), -32602, 'INVALID_PARAMS');
    });

    it('DM-PART: parts keep their oneof (text, raw, url, data), mediaType and filename through the hub', async () => {
      const parts = [
        { text: 'Notes', mediaType: 'text/markdown' },
        { raw: Buffer.from('%PDF-1.7').toString('base64'), filename: 'a.pdf', mediaType: 'application/pdf' },
        { url: 'https://example.com/b.png', filename: 'b.png', mediaType: 'image/png' },
        { data: { rows: [1, 2] }, mediaType: 'application/json' },
      ];
      const task = await submitted(parts);
      expect(task.history[0].parts).toEqual(parts);
      const [delivery] = (await hub.ok(agent.api_key, 'x-hub/inbox.poll', { wait_ms: 0, max: 100 })).deliveries.filter((d: any) => d.task_id === task.id);
      expect(delivery.message.parts).toEqual([
        { kind: 'data', mimeType: 'text/markdown', data: 'Notes' },
        { kind: 'file', name: 'a.pdf', mimeType: 'application/pdf', data: parts[1]!.raw },
        { kind: 'file', name: 'b.png', mimeType: 'image/png', uri: 'https://example.com/b.png' },
        { kind: 'data', mimeType: 'application/json', data: '{"rows":[1,2]}' },
      ]);
    });
  });

  describe('GetTask, ListTasks, CancelTask', () => {
    it('CORE-GET-001: MUST return the current state with status and artifacts', async () => {
      const task = await completed();
      const got = await ok('GetTask', { id: task.id });
      expect(got).toMatchObject({ id: task.id, status: { state: 'TASK_STATE_COMPLETED' }, artifacts: [{ artifactId: expect.any(String), name: 'answer', parts: [{ text: '42' }] }] });
    });

    it('CORE-GET-002: MUST return TaskNotFoundError (-32001) for an unknown task id', async () => {
      expectA2aError(await rpc('GetTask', { id: 'task_nonexistent' }), -32001, 'TASK_NOT_FOUND');
    });

    it('CORE-HIST-002: MUST NOT return more messages than historyLength (and 0 omits history)', async () => {
      const task = await submitted();
      await update(task.id, 'working', { message: { role: 'agent', parts: [{ kind: 'text', text: 'On it' }] } });
      expect((await ok('GetTask', { id: task.id, historyLength: 1 })).history).toEqual([expect.objectContaining({ role: 'ROLE_AGENT' })]);
      expect(await ok('GetTask', { id: task.id, historyLength: 0 })).not.toHaveProperty('history');
    });

    it('CORE-LIST-002 / CORE-LIST-004: MUST page with pageToken/nextPageToken, nextPageToken empty on the last page', async () => {
      const contextId = (await submitted()).contextId;
      for (let i = 0; i < 2; i += 1) await ok('SendMessage', { message: message(undefined, { contextId }), configuration: { returnImmediately: true } });
      const first = await ok('ListTasks', { contextId, pageSize: 2 });
      expect(first).toMatchObject({ pageSize: 2, totalSize: 3 });
      expect(first.tasks).toHaveLength(2);
      expect(first.nextPageToken).not.toBe('');
      const last = await ok('ListTasks', { contextId, pageSize: 2, pageToken: first.nextPageToken });
      expect(last.tasks).toHaveLength(1);
      expect(last.nextPageToken).toBe('');
    });

    it('CORE-LIST-003: MUST sort by status timestamp, most recently updated first', async () => {
      const contextId = (await submitted()).contextId;
      const later = (await ok('SendMessage', { message: message(undefined, { contextId }), configuration: { returnImmediately: true } })).task;
      const { tasks } = await ok('ListTasks', { contextId });
      expect(tasks[0].id).toBe(later.id);
      const stamps = tasks.map((t: any) => Date.parse(t.status.timestamp));
      expect(stamps).toEqual([...stamps].sort((a, b) => b - a));
    });

    it('CORE-LIST-005: MUST omit artifacts unless includeArtifacts is true', async () => {
      const task = await completed();
      const without = await ok('ListTasks', { contextId: task.contextId });
      expect(without.tasks[0]).not.toHaveProperty('artifacts');
      const withArtifacts = await ok('ListTasks', { contextId: task.contextId, includeArtifacts: true });
      expect(withArtifacts.tasks[0].artifacts).toHaveLength(1);
    });

    it('CORE-LIST-001: MUST return only tasks visible to the caller', async () => {
      const task = await submitted();
      const stranger = await hub.agent('tck', 'stranger');
      const reply = await fetch(endpoint, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${stranger.api_key}`, 'A2A-Version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { contextId: task.contextId } }),
      });
      expect(((await reply.json()) as any).result).toMatchObject({ tasks: [], totalSize: 0, nextPageToken: '' });
    });

    it('CORE-CANCEL-001: MUST return the updated task with its cancellation status', async () => {
      const task = await submitted();
      expect(await ok('CancelTask', { id: task.id })).toMatchObject({ id: task.id, status: { state: 'TASK_STATE_CANCELED' } });
    });

    it('CORE-CANCEL-002: MUST return TaskNotCancelableError (-32002) for a task in a terminal state', async () => {
      const task = await completed();
      expectA2aError(await rpc('CancelTask', { id: task.id }), -32002, 'TASK_NOT_CANCELABLE');
    });

    it('CORE-CANCEL-003: MUST return TaskNotFoundError (-32001) for an unknown task id', async () => {
      expectA2aError(await rpc('CancelTask', { id: 'task_nonexistent' }), -32001, 'TASK_NOT_FOUND');
    });
  });

  describe('Streaming', () => {
    it('CORE-STREAM-003 / JSONRPC-SSE-001: the stream MUST begin with the Task and close at a terminal state; each event is a JSON-RPC response', async () => {
      const opened = await stream('SendStreamingMessage', { message: message([text('Stream it')]) });
      expect(opened.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const [delivery] = (await hub.ok(agent.api_key, 'x-hub/inbox.poll', { wait_ms: 5000, max: 100 })).deliveries.filter((d: any) => d.message.parts[0].text === 'Stream it');
      await update(delivery.task_id, 'working');
      await update(delivery.task_id, 'completed', { artifacts: [{ name: 'answer', parts: [{ kind: 'text', text: 'Streamed' }] }] });
      const events = await opened.events();
      for (const e of events) expect(e.data).toMatchObject({ jsonrpc: '2.0', id: opened.id, result: expect.any(Object) });
      expect(Object.keys(events[0]!.data.result)).toEqual(['task']);
      expect(events.slice(1).map((e) => Object.keys(e.data.result)[0])).toEqual(['statusUpdate', 'artifactUpdate', 'statusUpdate']);
      expect(events.at(-1)!.data.result.statusUpdate).toMatchObject({ taskId: delivery.task_id, status: { state: 'TASK_STATE_COMPLETED' } });
      expect(events[2]!.data.result.artifactUpdate).toMatchObject({ taskId: delivery.task_id, artifact: { name: 'answer', parts: [{ text: 'Streamed' }] } });
    });

    it('STREAM-SUB-001 / STREAM-SUB-002: SubscribeToTask MUST send the Task first and end at a terminal state', async () => {
      const task = await submitted();
      const opened = await stream('SubscribeToTask', { id: task.id });
      await update(task.id, 'failed', { message: { role: 'agent', parts: [{ kind: 'text', text: 'Cannot' }] } });
      const events = await opened.events();
      expect(events[0]!.data.result.task).toMatchObject({ id: task.id, status: { state: 'TASK_STATE_SUBMITTED' } });
      expect(events.at(-1)!.data.result.statusUpdate).toMatchObject({ status: { state: 'TASK_STATE_FAILED', message: { role: 'ROLE_AGENT', parts: [{ text: 'Cannot' }] } } });
      expect(events.every((e) => e.id !== undefined)).toBe(true);
    });

    it('STREAM-SUB-003: SubscribeToTask MUST return UnsupportedOperationError (-32004) for a task in a terminal state', async () => {
      const task = await completed();
      const opened = await stream('SubscribeToTask', { id: task.id });
      expectA2aError({ status: opened.response.status, headers: opened.response.headers, body: await opened.response.json() }, -32004, 'UNSUPPORTED_OPERATION');
    });

    it('STREAM-SUB-004: SubscribeToTask MUST return TaskNotFoundError (-32001) for an unknown task', async () => {
      const opened = await stream('SubscribeToTask', { id: 'task_nonexistent' });
      expectA2aError({ status: opened.response.status, headers: opened.response.headers, body: await opened.response.json() }, -32001, 'TASK_NOT_FOUND');
    });
  });

  describe('Capabilities', () => {
    it('CORE-CAP-001: the card declares push notifications; a config URL the egress policy refuses is -32602 naming url', async () => {
      const card = (await (await fetch(`${hub.url}/agents/${agent.agent_id}/.well-known/agent-card.json`)).json()) as any;
      expect(card.capabilities.pushNotifications).toBe(true);
      const task = await submitted();
      const reply = await rpc('CreateTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1', url: 'http://127.0.0.1:9/hook' });
      expect([reply.body.error?.code, reply.body.error?.data?.[0]?.metadata?.field]).toEqual([-32602, 'url']);
      expect((await ok('ListTaskPushNotificationConfigs', { taskId: task.id })).configs).toEqual([]);
    });

    it('CORE-CAP-003: GetExtendedAgentCard returns the authenticated extended card the public card announces', async () => {
      const publicCard = (await (await fetch(`${hub.url}/agents/${agent.agent_id}/.well-known/agent-card.json`)).json()) as any;
      expect(publicCard.capabilities.extendedAgentCard).toBe(true);
      const extended = await ok('GetExtendedAgentCard', {});
      const { capabilities, ...rest } = extended;
      const { capabilities: publicCapabilities, ...publicRest } = publicCard;
      expect(rest).toEqual(publicRest);
      expect(capabilities).toEqual({
        ...publicCapabilities,
        extensions: [{
          uri: 'urn:agenthub:a2a:reach:v1',
          description: expect.any(String),
          required: false,
          params: { reach: 'same-tenant', canSendMessages: true, hubEndpoint: `${hub.url}/agents/${agent.agent_id}/a2a` },
        }],
      });
      expect(JSON.stringify(extended)).not.toContain('tck');

      // Another tenant's caller learns it needs a grant, then that it has one.
      const outsider = await hub.agent('outside', 'outsider');
      const asOutsider = () =>
        fetch(endpoint, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${outsider.api_key}`, 'A2A-Version': '1.0' },
          body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'GetExtendedAgentCard', params: {} }),
        }).then(async (r) => ((await r.json()) as any).result.capabilities.extensions[0].params);
      expect(await asOutsider()).toMatchObject({ reach: 'grant-required', canSendMessages: false, requestGrantWith: 'x-hub/grants.request' });
      const { grant } = await hub.ok(outsider.api_key, 'x-hub/grants.request', { agent_id: agent.agent_id });
      await hub.ok(agent.api_key, 'x-hub/grants.approve', { grant_id: grant.id });
      expect(await asOutsider()).toMatchObject({ reach: 'grant-approved', canSendMessages: true });

      // Without a key there is no extended card.
      const anonymous = await fetch(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'GetExtendedAgentCard', params: {} }) });
      expect(anonymous.status).toBe(401);
    });
  });

  describe('Versioning and the JSON-RPC envelope', () => {
    it('VER-SERVER-002: MUST return VersionNotSupportedError (-32009) for an unsupported version', async () => {
      expectA2aError(await rpc('GetTask', { id: 'task_x' }, { 'A2A-Version': '2.0' }), -32009, 'VERSION_NOT_SUPPORTED');
    });

    it('VER-SERVER-003: MUST read a missing A2A-Version as 0.3, which this endpoint refuses with -32009', async () => {
      const reply = await post({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'task_x' } }, { 'A2A-Version': '' });
      expectA2aError(reply, -32009, 'VERSION_NOT_SUPPORTED');
      expect(reply.body.error.message).toContain('0.3');
    });

    it('VER-CLIENT-002: patch numbers MUST NOT take part in negotiation (1.0.5 is 1.0)', async () => {
      expectA2aError(await rpc('GetTask', { id: 'task_nonexistent' }, { 'A2A-Version': '1.0.5' }), -32001, 'TASK_NOT_FOUND');
    });

    it('JSONRPC-ERR-001 / JSONRPC-ERR-002 / JSONRPC-ERR-003: errors carry code and message, A2A codes in -32001..-32099, ErrorInfo in a data array', async () => {
      const reply = await rpc('GetTask', { id: 'task_nonexistent' });
      expect(reply.body.error.code).toBeGreaterThanOrEqual(-32099);
      expect(reply.body.error.code).toBeLessThanOrEqual(-32001);
      expect(Array.isArray(reply.body.error.data)).toBe(true);
      expectA2aError(reply, -32001, 'TASK_NOT_FOUND');
    });

    it('JSONRPC-SVC-001: unknown methods (such as 0.3 names) get -32601; a body that is not JSON gets -32700', async () => {
      expect((await rpc('message/send', { message: message() })).body.error.code).toBe(-32601);
      expect((await post('{not json')).body).toMatchObject({ id: null, error: { code: -32700 } });
    });

    it('a call without a valid API key is refused (401) before anything else', async () => {
      const response = await fetch(endpoint, { method: 'POST', headers: { 'A2A-Version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }) });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    });
  });
});
