import { messagingv1 } from '@agenthub/proto';
import type { Resolver } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { sweepExpired } from '../src/index.js';
import { reservePort, startEchoAgent, type Behaviour, type EchoAgent } from './echo-agent.js';
import type { TestAgent } from './harness.js';
import { eventually, startPushStack, startRecorder, type PushStack } from './push-stack.js';

/**
 * Push agents over gRPC, each a real `@a2a-js/sdk` JSON-RPC server on loopback, with two messaging
 * replicas whose push workers share the work: forwarding and the answer flowing back (state,
 * messages, artifacts with their parts), blocking sends, an agent that is down and comes back,
 * input-required continuations, forwarded cancels, refusals, x-ttl.
 *
 * Push backoff and follow-ups run on the wall clock with a 200 ms cap; the service clock (queue
 * expiry) is moved by hand.
 */

const { TaskState } = messagingv1;
type Part = messagingv1.Part;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const message = (...parts: ReturnType<typeof text>[]) => ({ role: 'user', parts });
const PNG = Buffer.from('not really a png').toString('base64');
const MIXED = [
  text('Summarise these, please.'),
  { content: { case: 'file' as const, value: { name: 'chart.png', mimeType: 'image/png', data: PNG } } },
  { content: { case: 'file' as const, value: { name: 'report.pdf', mimeType: 'application/pdf', uri: 'https://example.com/report.pdf' } } },
  { content: { case: 'data' as const, value: { mimeType: 'application/json', data: '{"rows":3}' } } },
];

const partView = (p: Part) => {
  const c = p.content;
  if (c.case === 'text') return { text: c.value.text };
  if (c.case === 'file') return { file: { name: c.value.name, mimeType: c.value.mimeType, data: c.value.data, uri: c.value.uri } };
  if (c.case === 'data') return { data: { mimeType: c.value.mimeType, data: c.value.data } };
  return {};
};
const said = (task: messagingv1.Task | undefined) =>
  task?.messages.map((m) => `${m.role}: ${m.parts.map((p) => (p.content.case === 'text' ? p.content.value.text : `[${p.content.case}]`)).join(' ')}`);

describe.each(backends().map((b) => [b.name, b] as const))('push agents (%s)', (_name, backend) => {
  let stack: PushStack;
  let sender: TestAgent;
  const agents: EchoAgent[] = [];

  beforeAll(async () => {
    stack = await startPushStack(backend);
    sender = await stack.agent('sender');
  });
  afterAll(async () => {
    for (const agent of agents) await agent.stop();
    await stack?.stop();
  });

  const [a, b] = [() => stack.replicas[0]!, () => stack.replicas[1]!];
  async function pushAgent(behaviour: Behaviour, name: string) {
    const remote = await startEchoAgent(behaviour);
    agents.push(remote);
    return { remote, agent: await stack.agent(name, remote.url) };
  }
  const state = async (taskId: string) => (await a().getTask({ taskId }, sender.as)).task!;
  const queued = async (taskId: string) =>
    Number((await stack.db.query<{ n: string | number }>('SELECT count(*) AS n FROM deliveries WHERE task_id = $1', [taskId])).rows[0]!.n);

  it('a blocking send returns the completed task with the agent\'s messages and artifacts, parts mapped both ways', async () => {
    const { remote, agent } = await pushAgent('echo', 'echo');
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: { role: 'user', parts: MIXED }, blocking: true }, sender.as);

    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(said(task)).toEqual(['user: Summarise these, please. [file] [file] [data]', 'agent: Working on it', 'agent: Done']);
    expect(task!.artifacts).toHaveLength(1);
    expect(task!.artifacts[0]!.name).toBe('echo');
    expect(task!.artifacts[0]!.parts.map(partView)).toEqual([
      { text: 'Summarise these, please.' },
      { file: { name: 'chart.png', mimeType: 'image/png', data: PNG, uri: '' } },
      { file: { name: 'report.pdf', mimeType: 'application/pdf', data: '', uri: 'https://example.com/report.pdf' } },
      { data: { mimeType: 'application/json', data: '{"rows":3}' } },
    ]);
    // The agent saw the hub's message id (a redelivery is recognisable) and the hub's context.
    expect(remote.received.map((r) => [r.messageId, r.contextId])).toEqual([[task!.messages[0]!.messageId, task!.contextId]]);
    expect(await queued(task!.id)).toBe(0);
    // The other party sees the same task.
    expect((await b().getTask({ taskId: task!.id }, agent.as)).task?.artifacts).toHaveLength(1);
  });

  it('a non-blocking send comes back submitted and completes on its own; an answering agent counts online for x-ttl 0', async () => {
    const { agent } = await pushAgent('echo', 'echo-async');
    const { task } = await b().sendMessage({ recipientAgentId: agent.id, message: message(text('hello')) }, sender.as);
    expect(task?.state).toBe(TaskState.SUBMITTED);
    const done = await eventually(async () => {
      const t = await state(task!.id);
      return t.state === TaskState.COMPLETED && t;
    }, 'the task to complete');
    expect(done.artifacts[0]!.parts.map(partView)).toEqual([{ text: 'hello' }]);

    const { task: now } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('right now')), ttlSeconds: 0n, blocking: true }, sender.as);
    expect(now?.state).toBe(TaskState.COMPLETED);
  });

  it('an agent that is down keeps its queue, is retried, and gets all of it soon after it comes back', async () => {
    const port = await reservePort();
    const agent = await stack.agent('sleeper', `http://127.0.0.1:${port}/a2a`);
    const first = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('one')) }, sender.as)).task!;
    const second = (await b().sendMessage({ recipientAgentId: agent.id, message: message(text('two')) }, sender.as)).task!;

    // Several attempts fail (backoff capped at 200 ms); the tasks wait, the deliveries stay.
    await eventually(async () => {
      const { rows } = await stack.db.query<{ attempts: number }>('SELECT attempts FROM deliveries WHERE task_id = $1', [first.id]);
      return (rows[0]?.attempts ?? 0) >= 3;
    }, 'retries');
    expect((await state(first.id)).state).toBe(TaskState.SUBMITTED);
    expect(await queued(second.id)).toBe(1);
    // Not answering, it is not online: x-ttl 0 fails at once.
    expect((await a().sendMessage({ recipientAgentId: agent.id, message: message(text('now?')), ttlSeconds: 0n }, sender.as)).task?.state).toBe(
      TaskState.FAILED,
    );

    const remote = await startEchoAgent('echo', { port });
    agents.push(remote);
    // Both go out at once (several calls to one agent at a time), so either may complete first.
    for (const task of [first, second]) await eventually(async () => (await state(task.id)).state === TaskState.COMPLETED, 'the queue to arrive');
    expect(remote.received.map((r) => r.parts.map((p) => p.content?.value).join()).sort()).toEqual(['one', 'two']);
  });

  it('two replicas share the work: each message reaches the agent once', async () => {
    const { remote, agent } = await pushAgent('echo', 'popular');
    const sent: string[] = [];
    for (let i = 0; i < 8; i += 1) {
      const { task } = await stack.replicas[i % 2]!.sendMessage({ recipientAgentId: agent.id, message: message(text(`m${i}`)) }, sender.as);
      sent.push(task!.id);
    }
    for (const id of sent) await eventually(async () => (await state(id)).state === TaskState.COMPLETED, `task ${id} to complete`);
    expect(remote.received.map((r) => r.parts.map((p) => p.content?.value).join()).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']);
  });

  it('an agent too slow to answer in time gets the message again, under the same message id', async () => {
    const remote = await startEchoAgent('echo', { stallFirstMs: 1_500 });
    agents.push(remote);
    const agent = await stack.agent('laggard', remote.url);
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('again?')), blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(said(task)).toEqual(['user: again?', 'agent: Working on it', 'agent: Done']);
    // The agent took the first attempt but answered too late: it saw the same message id twice.
    await eventually(async () => remote.received.length === 2, 'the stalled request');
    expect(remote.received.map((r) => r.messageId)).toEqual([task!.messages[0]!.messageId, task!.messages[0]!.messageId]);
  });

  it('an input-required continuation goes to the agent\'s same task', async () => {
    const { remote, agent } = await pushAgent('ask', 'asker');
    const asked = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('Export the report')), blocking: true }, sender.as)).task!;
    expect(asked.state).toBe(TaskState.INPUT_REQUIRED);
    expect(said(asked)).toEqual(['user: Export the report', 'agent: Which format?']);

    const { task } = await b().sendMessage({ taskId: asked.id, message: message(text('PDF')), blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(said(task)).toEqual(['user: Export the report', 'agent: Which format?', 'user: PDF', 'agent: Working on it', 'agent: Done']);
    expect(task!.artifacts[0]!.parts.map(partView)).toEqual([{ text: 'PDF' }]);
    const [one, two] = remote.received;
    expect(two!.taskId).toBe(one!.agentTaskId);
    expect(two!.agentTaskId).toBe(one!.agentTaskId);
    expect(two!.contextId).toBe(asked.contextId);
  });

  it('an answer past the hub\'s part limits fails the task with the hub\'s own message, storing none of it (issue 12)', async () => {
    const { agent } = await pushAgent('oversized', 'oversized');
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('send the dump')), blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.FAILED);
    expect(task!.artifacts).toEqual([]);
    expect(said(task)!.at(-1)).toBe(
      "agent: The agent's answer was not accepted: Invalid params: artifacts[0].parts[0].data must be at most 699052 base64 characters; send a uri for larger files",
    );
    expect(await queued(task!.id)).toBe(0);
  });

  it('a revoked grant stops a push agent\'s task: nothing more is relayed, the task fails, the agent\'s task is canceled (issue 12)', async () => {
    const remote = await startEchoAgent('slow');
    agents.push(remote);
    const agent = await stack.agent('foreign-slowpoke', remote.url, 'globex');
    const { grant } = await stack.identity.requestGrant({ agentId: agent.id }, sender.as);
    await stack.identity.approveGrant({ grantId: grant!.id }, agent.as);
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('take your time')) }, sender.as);
    await eventually(async () => (await state(task!.id)).state === TaskState.WORKING, 'the agent to work');

    await stack.identity.revokeGrant({ grantId: grant!.id }, agent.as);
    const failed = await eventually(async () => {
      const t = await state(task!.id);
      return t.state === TaskState.FAILED && t;
    }, 'the task to fail');
    expect(said(failed)!.at(-1)).toBe('agent: The access grant between the agents was revoked');
    await eventually(async () => remote.canceled.length > 0, 'the cancel to reach the agent');
    expect(remote.canceled).toEqual([remote.received[0]!.agentTaskId]);
  });

  it('CancelTask forwards the cancel to the agent\'s task', async () => {
    const { remote, agent } = await pushAgent('slow', 'slowpoke');
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('take your time')) }, sender.as);
    await eventually(async () => (await state(task!.id)).state === TaskState.WORKING, 'the agent to work');

    const canceled = (await b().cancelTask({ taskId: task!.id }, sender.as)).task!;
    expect(canceled.state).toBe(TaskState.CANCELED);
    await eventually(async () => remote.canceled.length > 0, 'the cancel to reach the agent');
    expect(remote.canceled).toEqual([remote.received[0]!.agentTaskId]);
    expect((await state(task!.id)).state).toBe(TaskState.CANCELED);
  });

  it('an agent that refuses the message fails the task with its error, and is not asked again', async () => {
    const { remote, agent } = await pushAgent('text-only', 'picky');
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: { role: 'user', parts: MIXED }, blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.FAILED);
    const last = said(task)!.at(-1)!;
    // The A2A error code, not the agent's words (issue 12: no byte of a peer's answer in a task).
    expect(last).toBe('agent: The agent refused the message: A2A error -32005 (content type not supported)');
    // The task fails before the delivery is acknowledged: the blocking send may return in between.
    await eventually(async () => (await queued(task!.id)) === 0, 'the delivery to be acknowledged');
    expect(remote.received).toEqual([]);
  });

  // Issue 12: a redirect is not followed, and no byte of what a peer answered reaches the task.
  it('an agent that redirects to a loopback URL: the target hears nothing, the task holds none of the redirect', async () => {
    const internal = await startRecorder(() => ({ status: 200, body: '{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"INTERNAL-SECRET"}]}}}' }));
    const redirecting = await startRecorder(() => ({ status: 307, headers: { location: `${internal.url}/admin` }, body: 'REDIRECT-BODY' }));
    try {
      const agent = await stack.agent('redirector', `${redirecting.url}/a2a`);
      const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('the sender\'s secret')), blocking: true }, sender.as);
      expect(task?.state).toBe(TaskState.FAILED);
      expect(said(task)!.at(-1)).toBe("agent: The message could not be delivered: The agent's endpoint answered HTTP 307, a redirect the hub does not follow");
      expect(redirecting.received).toHaveLength(1);
      expect(internal.received).toEqual([]);
      const stored = JSON.stringify((await state(task!.id)).messages.map((m) => m.parts));
      expect(stored).not.toContain('REDIRECT-BODY');
      expect(stored).not.toContain('INTERNAL-SECRET');
      expect(stack.logged()).toContain('push agent refused');
      expect(stack.logged()).not.toContain('REDIRECT-BODY');
      expect(stack.logged()).not.toContain('INTERNAL-SECRET');
      await eventually(async () => (await queued(task!.id)) === 0, 'the delivery to be acknowledged');
    } finally {
      await internal.close();
      await redirecting.close();
    }
  });

  it("an agent's error answer is not copied: the task says the HTTP status, or that the answer could not be read", async () => {
    const failing = await startRecorder((index) =>
      index === 0 ? { status: 403, body: 'PEER-BODY: stack trace and internal hostnames' } : { status: 200, body: '<html>PEER-BODY</html>' },
    );
    try {
      const agent = await stack.agent('leaky', `${failing.url}/a2a`);
      const forbidden = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('one')), blocking: true }, sender.as)).task!;
      expect(said(forbidden)!.at(-1)).toBe("agent: The message could not be delivered: The agent's endpoint answered HTTP 403");
      const garbled = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('two')), blocking: true }, sender.as)).task!;
      expect(said(garbled)!.at(-1)).toBe("agent: The message could not be delivered: The agent's answer could not be read");
      for (const task of [forbidden, garbled]) {
        expect(task.state).toBe(TaskState.FAILED);
        expect(JSON.stringify((await state(task.id)).messages.map((m) => m.parts))).not.toContain('PEER-BODY');
      }
      expect(stack.logged()).not.toContain('PEER-BODY');
    } finally {
      await failing.close();
    }
  });

  // Issue 12 item 3: push agents can authenticate the hub.
  it("every call carries the agent's push secret as a bearer token; an agent that checks it refuses calls without it", async () => {
    const remote = await startEchoAgent('echo');
    agents.push(remote);
    const agent = await stack.agent('guarded', remote.url);
    expect(agent.pushSecret).toMatch(/^ahp_[A-Za-z0-9_-]{43}$/);
    remote.pushSecret = agent.pushSecret;
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('from the hub')), blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(remote.authorizations.length).toBeGreaterThan(0);
    expect(new Set(remote.authorizations)).toEqual(new Set([`Bearer ${agent.pushSecret}`]));

    // Rotated by the operator: the hub sends only the new secret, so an agent still expecting the
    // old one refuses the call (HTTP 401), and its executor never runs.
    const rotated = await stack.rotatePushSecret(agent.id);
    expect(rotated).not.toBe(agent.pushSecret);
    const refused = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('after rotation')), blocking: true }, sender.as)).task!;
    expect(refused.state).toBe(TaskState.FAILED);
    expect(said(refused)!.at(-1)).toBe("agent: The message could not be delivered: The agent's endpoint answered HTTP 401");
    expect(remote.received.map((r) => r.parts.map((p) => p.content?.value).join())).toEqual(['from the hub']);
    expect(remote.authorizations.at(-1)).toBe(`Bearer ${rotated}`);

    remote.pushSecret = rotated;
    const accepted = (await a().sendMessage({ recipientAgentId: agent.id, message: message(text('with the new secret')), blocking: true }, sender.as)).task!;
    expect(accepted.state).toBe(TaskState.COMPLETED);
    for (const secret of [agent.pushSecret, rotated]) expect(stack.logged()).not.toContain(secret.slice(4));
  });

  it('an agent that answers with a message completes the task with it', async () => {
    const { agent } = await pushAgent('message', 'talker');
    const { task } = await b().sendMessage({ recipientAgentId: agent.id, message: message(text('hi')), blocking: true }, sender.as);
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(said(task)).toEqual(['user: hi', 'agent: Hello from a message']);
  });

  it('x-ttl: the sweeper fails a task whose push agent stayed down past it', async () => {
    const agent = await stack.agent('gone', `http://127.0.0.1:${await reservePort()}/a2a`);
    const { task } = await a().sendMessage({ recipientAgentId: agent.id, message: message(text('anyone?')), ttlSeconds: 60n }, sender.as);
    await eventually(async () => {
      const { rows } = await stack.db.query<{ attempts: number }>('SELECT attempts FROM deliveries WHERE task_id = $1', [task!.id]);
      return (rows[0]?.attempts ?? 0) >= 1;
    }, 'an attempt');
    stack.clock.advance(61_000);
    expect(await sweepExpired(stack.env, testLogger())).toBe(1);
    expect((await state(task!.id)).state).toBe(TaskState.FAILED);
    expect(await queued(task!.id)).toBe(0);
  });
});

describe.each(backends().map((b) => [b.name, b] as const))('push agents and the egress policy (%s)', (_name, backend) => {
  let stack: PushStack;
  const DNS: Record<string, string> = {};
  const resolve: Resolver = async (host) => (DNS[host] ? [{ address: DNS[host]!, family: 4 }] : []);

  beforeAll(async () => {
    stack = await startPushStack(backend, { allowPrivate: false, resolve });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('an endpoint that resolves to loopback by send time gets nothing: the address is checked at every connection', async () => {
    const remote = await startEchoAgent('echo');
    try {
      DNS['rebind.example'] = '93.184.216.34';
      const url = remote.url.replace('127.0.0.1', 'rebind.example');
      const agent = await stack.agent('rebinder', url);
      DNS['rebind.example'] = '127.0.0.1';
      const sender = await stack.agent('sender');
      const { task } = await stack.replicas[0]!.sendMessage({ recipientAgentId: agent.id, message: message(text('hello')), blocking: true }, sender.as);
      expect(task?.state).toBe(TaskState.FAILED);
      expect(said(task)!.at(-1)).toBe("agent: The message could not be delivered: The agent's endpoint is on an address the hub may not call");
      expect(remote.received).toEqual([]);
    } finally {
      await remote.stop();
    }
  });
});
