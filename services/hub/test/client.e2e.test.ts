import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { HubClient, HubRpcError, type TaskEvent } from '@agenthub/client';
import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * `@agenthub/client` against a real hub: the example agent (`examples/echo-agent.mjs`, run as
 * written in its own process) answers a SendMessage; serve() moves tasks from its handler's reply;
 * refusals arrive as HubRpcError with the hub's code and reason; task streams resume by event id.
 */

const EXAMPLE = fileURLToPath(new URL('../../../examples/echo-agent.mjs', import.meta.url));

/** Follows a task to its final event with the client's own stream. */
async function finalTask(client: HubClient, taskId: string) {
  let last: TaskEvent | undefined;
  for await (const { result } of client.stream('SubscribeToTask', { id: taskId })) last = result;
  return client.call('GetTask', { id: taskId }).then((task) => ({ task, last }));
}

describe.each(backends().map((b) => [b.name, b] as const))('@agenthub/client (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let echo: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    sender = await hub.agent('client-acme', 'sender');
    echo = await hub.agent('client-acme', 'echo');
  });
  afterAll(() => hub?.stop());

  it('the echo example answers a SendMessage through the hub', async () => {
    const agent: ChildProcess = spawn(process.execPath, [EXAMPLE], {
      env: { ...process.env, AGENTHUB_URL: hub.url, AGENTHUB_API_KEY: echo.api_key },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    agent.stdout!.on('data', (chunk) => (output += chunk));
    agent.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => agent.once('exit', resolve));
    try {
      const client = new HubClient({ url: hub.url, apiKey: sender.api_key });
      const sent = await client.sendText(echo.agent_id, 'hello hub', { blocking: true });
      const { task } = await finalTask(client, sent.id);
      expect(task.status.state).toBe('completed');
      expect(task.artifacts.map((a) => a.parts)).toEqual([[{ kind: 'text', text: `buh olleh (for ${sender.agent_id})` }]]);
    } finally {
      agent.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
    expect(output).toContain('echo agent: stopped');
  });

  it('serve() moves each task from the reply: input-required, failed on a throw, acked once moved', async () => {
    const worker = await hub.agent('client-acme', 'worker');
    const stop = new AbortController();
    const errors: unknown[] = [];
    const serving = new HubClient({ url: hub.url, apiKey: worker.api_key }).serve(
      ({ text }) => {
        if (text === 'boom') throw new Error('handler bug');
        return { inputRequired: `which ${text}?` };
      },
      { signal: stop.signal, onError: (err) => errors.push(err) },
    );
    try {
      const client = new HubClient({ url: hub.url, apiKey: sender.api_key });
      const asked = await client.sendText(worker.agent_id, 'report', { blocking: true });
      const question = asked.status.state === 'input-required' ? asked : (await waitFor(client, asked.id, 'input-required'));
      expect(question.messages?.at(-1)).toMatchObject({ role: 'agent', parts: [{ kind: 'text', text: 'which report?' }] });

      const failed = await client.sendText(worker.agent_id, 'boom', { blocking: true });
      const { task } = await finalTask(client, failed.id);
      expect(task.status.state).toBe('failed');
      expect(JSON.stringify(task.messages)).not.toContain('handler bug');
      expect(errors).toEqual([expect.objectContaining({ message: 'handler bug' })]);
    } finally {
      stop.abort();
      await serving;
    }
    // Every delivery was acknowledged: nothing is handed out again.
    const inbox = await new HubClient({ url: hub.url, apiKey: worker.api_key }).call('x-hub/inbox.poll', { wait_ms: 0 });
    expect(inbox.deliveries).toEqual([]);
  });

  it('refusals are HubRpcError with the JSON-RPC code, data.reason and field', async () => {
    const client = new HubClient({ url: hub.url, apiKey: sender.api_key });
    await expect(client.call('x-hub/workspace.get', { workspace_id: 'ws_missing' })).rejects.toMatchObject({ code: -32101, reason: 'not_found' });
    const invalid = await client.call('x-hub/workspace.create', { name: '' }).catch((err: unknown) => err);
    expect(invalid).toBeInstanceOf(HubRpcError);
    expect(invalid).toMatchObject({ code: -32602, field: 'name', retryable: false });
    const stranger = new HubClient({ url: hub.url, apiKey: `ahk_${'x'.repeat(43)}` });
    await expect(stranger.call('x-hub/workspace.list', {})).rejects.toMatchObject({ code: -32000, httpStatus: 401 });
  });

  it('a task stream resumes after the last event id it saw', async () => {
    const worker = await hub.agent('client-acme', 'resumer');
    const client = new HubClient({ url: hub.url, apiKey: sender.api_key });
    const recipient = new HubClient({ url: hub.url, apiKey: worker.api_key });
    const task = await client.sendText(worker.agent_id, 'step');
    const opened = client.stream('SubscribeToTask', { id: task.id });
    const seen = (await opened.next()).value!.id!;
    await opened.return(undefined);
    await recipient.call('x-hub/tasks.update', { task_id: task.id, state: 'working' });
    await recipient.call('x-hub/tasks.update', { task_id: task.id, state: 'completed', artifacts: [{ parts: [{ kind: 'text', text: 'done' }] }] });
    const rest = [];
    for await (const item of client.stream('SubscribeToTask', { id: task.id }, { lastEventId: seen })) rest.push(item.result);
    expect(rest.map((e) => (e.kind === 'status-update' ? e.status.state : e.kind))).toEqual(['working', 'artifact-update', 'completed']);
  });
});

async function waitFor(client: HubClient, taskId: string, state: string) {
  for await (const { result } of client.stream('SubscribeToTask', { id: taskId })) {
    if ((result.kind === 'task' && result.status.state === state) || (result.kind === 'status-update' && result.status.state === state)) break;
  }
  return client.call('GetTask', { id: taskId });
}
