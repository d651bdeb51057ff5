import { Role, TaskState, type Message, type Part, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { startEchoAgent, type EchoAgent } from '../../messaging/test/echo-agent.js';
import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Standard A2A 1.0 clients through AgentHub: the `@a2a-js/sdk` client, given only an agent's Agent
 * Card URL and an API key, sends (blocking and streaming), gets, lists and cancels tasks through
 * the hub's strict endpoint, to a connected agent (polling its inbox in the interface's dialect)
 * and to a push agent (itself an `@a2a-js/sdk` server). A task made through either dialect is the
 * same task in the other and in the recipient's inbox.
 */

const A2A = { 'A2A-Version': '1.0' };

const textPart = (value: string, mediaType = 'text/plain'): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType });
const MIXED: Part[] = [
  textPart('Summarise these, please.'),
  { content: { $case: 'raw', value: Buffer.from('not really a png') }, metadata: undefined, filename: 'chart.png', mediaType: 'image/png' },
  { content: { $case: 'url', value: 'https://example.com/report.pdf' }, metadata: undefined, filename: 'report.pdf', mediaType: 'application/pdf' },
  { content: { $case: 'data', value: { rows: 3 } }, metadata: undefined, filename: '', mediaType: 'application/json' },
];

let nextMessage = 1;
function userMessage(parts: Part[], ids: { taskId?: string; contextId?: string } = {}): Message {
  return {
    messageId: `m-${Date.now()}-${nextMessage++}`,
    contextId: ids.contextId ?? '',
    taskId: ids.taskId ?? '',
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}
const send = (message: Message, returnImmediately = false) => ({
  tenant: '',
  message,
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately },
  metadata: undefined,
});

interface Logged {
  url: string;
  headers: Headers;
  body: any;
}

/** The SDK's own way in: a card URL and a fetch that adds the API key (and records requests). */
async function sdkClient(cardUrl: string, apiKey: string, log: Logged[] = []): Promise<Client> {
  const fetchImpl: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('Authorization', `Bearer ${apiKey}`);
    if (typeof init?.body === 'string') log.push({ url: String(input), headers, body: JSON.parse(init.body) });
    return fetch(input, { ...init, headers });
  };
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] }).createFromUrl(cardUrl, '');
}

/**
 * A connected agent: long-polls its inbox in the interface's dialect, acknowledges, and answers
 * each message by its first text: `slow` stays working, `ask` waits for input, anything else is
 * echoed back as an artifact and completed.
 */
function connectedAgent(hub: TestHub, agent: Agent) {
  let running = true;
  const seen: any[] = [];
  const loop = (async () => {
    while (running) {
      const { deliveries } = await hub.ok(agent.api_key, 'x-hub/inbox.poll', { wait_ms: 200 });
      for (const d of deliveries) {
        seen.push(d);
        await hub.ok(agent.api_key, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
        const said = d.message.parts.find((p: any) => p.kind === 'text')?.text;
        const reply = (text: string) => ({ role: 'agent', parts: [{ kind: 'text', text }] });
        // The sender may cancel meanwhile; the hub then refuses the update, which ends this task's work.
        const update = (params: Record<string, unknown>) => hub.call(agent.api_key, 'x-hub/tasks.update', { task_id: d.task_id, ...params });
        await update({ state: 'working', message: reply('Working on it') });
        if (said === 'slow') continue;
        if (said === 'ask') {
          await update({ state: 'input-required', message: reply('Which format?') });
          continue;
        }
        await update({
          state: 'completed',
          message: reply('Done'),
          artifacts: [{ name: 'echo', parts: d.message.parts }],
        });
      }
    }
  })();
  return {
    seen,
    async stop() {
      running = false;
      await loop;
    },
  };
}

const agentParts = (task: Task) => task.history.filter((m) => m.role === Role.ROLE_AGENT).map((m) => m.parts.map((p) => p.content?.value));

describe.each(hubModes().map((m) => [m.name, m] as const))('A2A 1.0 clients through the hub (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;
  let connected: ReturnType<typeof connectedAgent>;
  let remote: EchoAgent;
  let pushAgentId: string;
  const cardUrl = (agentId: string) => `${hub.url}/agents/${agentId}/.well-known/agent-card.json`;

  beforeAll(async () => {
    hub = await startTestHub(backend, { MESSAGING_PUSH_MAX_BACKOFF_MS: '200', MESSAGING_BLOCKING_MS: '10000', HUB_EGRESS_ALLOW_PRIVATE: 'true' });
    sender = await hub.agent('acme', 'sender');
    recipient = await hub.agent('acme', 'worker');
    connected = connectedAgent(hub, recipient);
    remote = await startEchoAgent('echo');
    const created = await hub.admin('agents.create', { tenant_id: 'acme', name: 'echo', create_tenant: true, endpoint_url: remote.url });
    pushAgentId = created.agent.id;
  });
  afterAll(async () => {
    await connected?.stop();
    await remote?.stop();
    await hub?.stop();
  });

  describe('to a connected agent', () => {
    it('completes a blocking exchange given only the Agent Card URL and an API key', async () => {
      const log: Logged[] = [];
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key, log);
      const task = (await client.sendMessage(send(userMessage(MIXED)))) as Task;

      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.artifacts).toEqual([expect.objectContaining({ name: 'echo', parts: MIXED })]);
      expect(task.history[0]).toMatchObject({ role: Role.ROLE_USER, parts: MIXED, taskId: task.id, contextId: task.contextId });
      expect(agentParts(task)).toEqual([['Working on it'], ['Done']]);
      // What the SDK put on the wire: A2A 1.0 names, ProtoJSON, the version header, our key.
      const sent = log.at(-1)!;
      expect(sent.url).toBe(`${hub.url}/agents/${recipient.agent_id}/a2a/v1`);
      expect(sent.headers.get('A2A-Version')).toBe('1.0');
      expect(sent.headers.get('Authorization')).toBe(`Bearer ${sender.api_key}`);
      expect(sent.body).toMatchObject({ jsonrpc: '2.0', method: 'SendMessage', params: { message: { role: 'ROLE_USER', parts: [{ text: 'Summarise these, please.' }, { raw: expect.any(String), filename: 'chart.png' }, { url: 'https://example.com/report.pdf' }, { data: { rows: 3 } }] } } });
    });

    it('completes a streaming exchange: the task first, then its updates, ending at completed', async () => {
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key);
      const events: StreamResponse[] = [];
      for await (const event of client.sendMessageStream(send(userMessage([textPart('Stream, please')])))) events.push(event);

      expect(events[0]!.payload?.$case).toBe('task');
      const statuses = events.flatMap((e) => (e.payload?.$case === 'statusUpdate' ? [e.payload.value.status?.state] : []));
      expect(statuses).toEqual([TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]);
      const artifacts = events.flatMap((e) => (e.payload?.$case === 'artifactUpdate' ? [e.payload.value.artifact] : []));
      expect(artifacts).toEqual([expect.objectContaining({ name: 'echo', parts: [textPart('Stream, please')] })]);
      expect(events.at(-1)!.payload).toMatchObject({ $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } });
    });

    it('gets, lists a page at a time, and cancels', async () => {
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key);
      const slow = (await client.sendMessage(send(userMessage([textPart('slow')]), true))) as Task;
      expect(slow.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);

      const got = await client.getTask({ tenant: '', id: slow.id, historyLength: undefined });
      expect(got).toMatchObject({ id: slow.id, contextId: slow.contextId });

      const first = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 1, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
      expect(first.tasks).toHaveLength(1);
      expect(first.nextPageToken).not.toBe('');
      const second = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 1, pageToken: first.nextPageToken, historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
      expect(second.tasks).toHaveLength(1);
      expect(second.tasks[0]!.id).not.toBe(first.tasks[0]!.id);
      expect(first.totalSize).toBeGreaterThanOrEqual(2);

      const canceled = await client.cancelTask({ tenant: '', id: slow.id, metadata: undefined });
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      await expect(client.cancelTask({ tenant: '', id: slow.id, metadata: undefined })).rejects.toMatchObject({ envelopeCode: -32002 });
      await expect(client.getTask({ tenant: '', id: 'task_doesnotexist', historyLength: undefined })).rejects.toMatchObject({ envelopeCode: -32001 });
    });

    it('lists with no filter at all: listTasks({}), which sends status UNRECOGNIZED', async () => {
      const log: Logged[] = [];
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key, log);
      const sent = (await client.sendMessage(send(userMessage([textPart('Listed')])))) as Task;
      const listed = await client.listTasks({} as Parameters<Client['listTasks']>[0]);
      expect(log.at(-1)!.body.params).toMatchObject({ status: 'UNRECOGNIZED' });
      expect(listed.tasks.map((t) => t.id)).toContain(sent.id);
    });

    it('continues a task that waits for input, in the same context', async () => {
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key);
      const asked = (await client.sendMessage(send(userMessage([textPart('ask')])))) as Task;
      expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const answered = (await client.sendMessage(send(userMessage([textPart('PDF')], { taskId: asked.id, contextId: asked.contextId })))) as Task;
      expect(answered).toMatchObject({ id: asked.id, contextId: asked.contextId, status: { state: TaskState.TASK_STATE_COMPLETED } });
      expect(answered.history.map((m) => m.parts[0]!.content?.value)).toEqual(['ask', 'Working on it', 'Which format?', 'PDF', 'Working on it', 'Done']);
    });
  });

  describe('one task, three views', () => {
    it('a task sent through the strict endpoint is the same task in the interface dialect and in the inbox', async () => {
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key);
      const task = (await client.sendMessage(send(userMessage([textPart('Three views')])))) as Task;
      expect(connected.seen.some((d) => d.task_id === task.id)).toBe(true);

      const viaHub = (await hub.call(sender.api_key, 'GetTask', { id: task.id }, { headers: A2A })).body.result;
      expect(viaHub).toMatchObject({ id: task.id, contextId: task.contextId, status: { state: 'completed', timestamp: task.status?.timestamp } });
      expect(viaHub.messages.map((m: any) => [m.role, m.messageId, m.parts])).toEqual(
        task.history.map((m) => [m.role === Role.ROLE_USER ? 'user' : 'agent', m.messageId, m.parts.map((p) => ({ kind: 'text', text: p.content?.value }))]),
      );
      expect(viaHub.artifacts).toEqual(task.artifacts.map((a) => ({ id: a.artifactId, name: a.name, parts: [{ kind: 'text', text: 'Three views' }] })));
    });

    it('a task sent in the interface dialect is read and canceled by the SDK client', async () => {
      const sent = (await hub.call(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'slow' }] }, configuration: { agentId: recipient.agent_id } }, { headers: A2A })).body.result;
      // The agent takes it and says it is working (how fast varies): read once it has.
      for (let i = 0; i < 100; i++) {
        const { state } = (await hub.call(sender.api_key, 'GetTask', { id: sent.id }, { headers: A2A })).body.result.status;
        if (state === 'working') break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const client = await sdkClient(cardUrl(recipient.agent_id), sender.api_key);
      const read = await client.getTask({ tenant: '', id: sent.id, historyLength: undefined });
      expect(read).toMatchObject({
        id: sent.id,
        contextId: sent.contextId,
        status: { state: TaskState.TASK_STATE_WORKING },
        history: [{ role: Role.ROLE_USER, parts: [textPart('slow')] }, { role: Role.ROLE_AGENT, parts: [textPart('Working on it')] }],
      });

      const canceled = await client.cancelTask({ tenant: '', id: sent.id, metadata: undefined });
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      const after = (await hub.call(sender.api_key, 'GetTask', { id: sent.id }, { headers: A2A })).body.result;
      expect(after.status.state).toBe('canceled');
      // The recipient sees the same end in its own dialect.
      const recipientView = (await hub.call(recipient.api_key, 'GetTask', { id: sent.id }, { headers: A2A })).body.result;
      expect(recipientView.status.state).toBe('canceled');
    });
  });

  describe('to a push agent (an @a2a-js/sdk server)', () => {
    it('completes a blocking exchange with the agent\'s artifacts and messages', async () => {
      const client = await sdkClient(cardUrl(pushAgentId), sender.api_key);
      const task = (await client.sendMessage(send(userMessage(MIXED)))) as Task;
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.artifacts).toEqual([expect.objectContaining({ name: 'echo', parts: MIXED })]);
      expect(agentParts(task)).toEqual([['Working on it'], ['Done']]);
      expect(remote.received.at(-1)!.messageId).toBe(task.history[0]!.messageId);
    });

    it('relays the agent\'s markdown to the client as markdown, not as plain text', async () => {
      const client = await sdkClient(cardUrl(pushAgentId), sender.api_key);
      const markdown = textPart('# Report\n\n**All** done.', 'text/markdown');
      const task = (await client.sendMessage(send(userMessage([markdown])))) as Task;
      expect(remote.received.at(-1)!.parts).toEqual([markdown]);
      // The echo agent answers with the same part in its artifact: it comes back with its media type.
      expect(task.artifacts).toEqual([expect.objectContaining({ name: 'echo', parts: [markdown] })]);
      const read = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
      expect(read.artifacts).toEqual([expect.objectContaining({ parts: [markdown] })]);
    });

    it('completes a streaming exchange ending at completed', async () => {
      const client = await sdkClient(cardUrl(pushAgentId), sender.api_key);
      const events: StreamResponse[] = [];
      for await (const event of client.sendMessageStream(send(userMessage([textPart('Stream to a push agent')])))) events.push(event);
      expect(events[0]!.payload?.$case).toBe('task');
      expect(events.at(-1)!.payload).toMatchObject({ $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } });
      const final = await client.getTask({ tenant: '', id: (events[0]!.payload!.value as Task).id, historyLength: undefined });
      expect(final.artifacts).toEqual([expect.objectContaining({ name: 'echo', parts: [textPart('Stream to a push agent')] })]);
    });
  });
});
